// A model of the outside project: a two-layer MLP classifier, differentiated by llmcc_adgen.
#pragma once

#include "llmcc/adgen.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/linear.h"

namespace consumer {

using llmcc::Tensor;
using llmcc::Tokens;

struct Mlp {
  Tensor w1;  // (H, C)
  Tensor w2;  // (V, H)
  // x: (N, C) -> logits (N, V)
  Tensor forward(const Tensor& x) const { return llmcc::linear_nobias(llmcc::gelu(llmcc::linear_nobias(x, w1)), w2); }
};

// Mean cross-entropy of the N rows of x against targets (1, N); V classes.
LLMCC_ADGEN_ENTRY inline float loss(const Mlp& m, const Tensor& x, const Tokens& targets, int V) {
  return llmcc::cross_entropy(m.forward(x), targets, V, -1);
}

}  // namespace consumer
