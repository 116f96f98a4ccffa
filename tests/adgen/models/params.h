// The generated parameter list: LLMCC_ADGEN_NAME on Tensor fields, on a nested module and on a
// std::vector of modules (names with dots), default names elsewhere, a config field between
// parameters; a model that keeps its own member list; and the Entry trait of an entry whose
// float argument is outside LLMCC_ADGEN_WRT.
#pragma once

#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/rmsnorm.h"
#include "llmcc/ops/scale.h"

namespace pm {

using llmcc::Tensor;

struct Norm {
  float eps = 1e-5f;
  Tensor w LLMCC_ADGEN_NAME("scale");  // (C)
  Tensor forward(const Tensor& x) const { return llmcc::rmsnorm(x, w, eps); }
};

struct Proj {
  Tensor w LLMCC_ADGEN_NAME("kernel"), b LLMCC_ADGEN_NAME("bias");  // (OC, C), (OC)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, w, b); }
};

struct Layer {
  Norm norm LLMCC_ADGEN_NAME("ln");
  Proj up;                                 // (4C, C)
  Proj down LLMCC_ADGEN_NAME("out.proj");  // (C, 4C)
  Tensor forward(const Tensor& x) const { return x + down.forward(llmcc::gelu(up.forward(norm.forward(x)))); }
};

struct Net {
  int vocab = 0;
  Tensor emb LLMCC_ADGEN_NAME("embed.weight");  // (V, C)
  std::vector<Layer> layers LLMCC_ADGEN_NAME("blocks");
  Norm final_norm;
  Proj head;  // (V, C)
  Tensor forward(const llmcc::Tokens& idx) const {
    Tensor x = llmcc::token_embedding(idx, emb);  // (B, T, C)
    for (const Layer& l : layers) x = l.forward(x);
    return head.forward(final_norm.forward(x));  // (B, T, V)
  }
};

// Only the model gets an adjoint: net_loss_Entry passes nullptr for d_scale.
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("m") inline float net_loss(const Net& m, const llmcc::Tokens& idx,
                                                            const llmcc::Tokens& targets, float scale) {
  return scale * llmcc::cross_entropy(m.forward(idx), targets, m.vocab, -1);
}

// x gets an adjoint: no head_loss_Entry.
LLMCC_ADGEN_ENTRY inline float head_loss(const Net& m, const Tensor& x, const llmcc::Tokens& targets) {
  return llmcc::cross_entropy(m.head.forward(x), targets, m.vocab, -1);
}

// A model with its own list (another order and names than its fields'): the member wins.
struct Listed {
  Tensor a, b;  // (C, C), (C)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, a, b); }
  template <class F>
  void for_each_parameter(F&& f) {
    f("second", b);
    f("first", a);
  }
};

LLMCC_ADGEN_ENTRY inline float listed_loss(const Listed& m, const Tensor& x, const llmcc::Tokens& targets) {
  return llmcc::cross_entropy(m.forward(x), targets, 3, -1);
}

}  // namespace pm
