// A character-level MLP language model (Bengio et al. 2003, as in Karpathy's makemore): the
// previous K characters are embedded, the K embeddings concatenated, passed through a tanh
// hidden layer, and a linear layer gives logits over the next character. adgen reads this file
// and generates the backward (char_mlp_loss_grad) and the trait the Trainer takes
// (char_mlp_loss_Entry).
#pragma once

#include <cmath>
#include <cstdint>

#include "llmcc/adgen.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/view.h"

namespace char_mlp {

using llmcc::Shape;
using llmcc::Tensor;
using llmcc::Tokens;

// The hidden activation, element-wise: adgen differentiates the scalar function itself.
inline float tanh_act(float x) { return std::tanh(x); }

struct Config {
  int V = 0;  // characters in the vocabulary
  int K = 0;  // context: the previous K characters
  int C = 0;  // embedding size of one character
  int H = 0;  // hidden units
};

struct Linear {
  Tensor w LLMCC_ADGEN_NAME("weight");                                      // (OC, IC)
  Tensor b LLMCC_ADGEN_NAME("bias");                                        // (OC)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, w, b); }  // (N, IC) -> (N, OC)
};

struct CharMlp {
  Config cfg;
  Tensor wte;     // (V, C) character embeddings
  Linear hidden;  // (H, K * C)
  Linear head;    // (V, H)

  CharMlp() = default;
  // Declares every parameter's shape (no storage); llmcc::bind_parameters(model) binds them in
  // the order adgen lists them (the fields': wte, hidden.weight, ..., head.bias).
  explicit CharMlp(const Config& c)
      : cfg(c),
        wte(nullptr, {c.V, c.C}),
        hidden{Tensor(nullptr, {c.H, c.K * c.C}), Tensor(nullptr, {c.H})},
        head{Tensor(nullptr, {c.V, c.H}), Tensor(nullptr, {c.V})} {}

  // ctx: (B, K) character ids, oldest first; returns the next character's logits (B, V).
  Tensor forward(const Tokens& ctx) const {
    const std::int64_t B = ctx.B();
    Tensor e = llmcc::token_embedding(ctx, wte);                              // (B, K, C)
    Tensor x = llmcc::view(e, Shape{B, std::int64_t{cfg.K} * cfg.C}, 0);      // (B, K*C): concatenated
    Tensor h = llmcc::adgen::map_unary<tanh_act>(hidden.forward(x), "tanh");  // (B, H)
    return head.forward(h);                                                   // (B, V)
  }
};

// Mean cross-entropy of the next character. ctx: (B, K); next: (B, 1).
LLMCC_ADGEN_ENTRY inline float char_mlp_loss(const CharMlp& m, const Tokens& ctx, const Tokens& next) {
  return llmcc::cross_entropy(m.forward(ctx), next, m.cfg.V, -1);
}

}  // namespace char_mlp
