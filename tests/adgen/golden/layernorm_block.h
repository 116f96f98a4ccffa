// Golden (and the docs/adgen.md example): GPT-2's LayerNorm and a pre-norm MLP block on the
// library's rules.
#pragma once
#include "llmcc/ops/add.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"
namespace g_block {
using llmcc::Tensor;
struct LayerNorm {
  Tensor w, b;  // (C)
  Tensor forward(const Tensor& x) const { return llmcc::layernorm(x, w, b); }
};
struct Linear {
  Tensor w, b;  // (OC, C), (OC)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, w, b); }
};
struct Block {
  LayerNorm ln;
  Linear fc, proj;
  Tensor forward(const Tensor& x) const { return x + proj.forward(llmcc::gelu(fc.forward(ln.forward(x)))); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Block& b, const Tensor& x, const llmcc::Tokens& targets) {
  return llmcc::cross_entropy(b.forward(x), targets, 8, -1);
}
}  // namespace g_block
