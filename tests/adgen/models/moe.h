// A soft mixture of two experts with the tensor algebra of sub.h and add/mul's broadcasting: a
// gate per row, g = sigmoid(x Wg^T) (a column vector), mixes the experts as g * e1 + (1 - g) * e2;
// a learnable scalar scales the mixture's residual, and a bias per channel (a row vector) is
// added after it. docs/library.md shows it.
#pragma once

#include <cmath>

#include "llmcc/adgen.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/mse_loss.h"
#include "llmcc/ops/mul.h"
#include "llmcc/ops/sub.h"

namespace moe {

using llmcc::Tensor;

inline float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

struct Expert {
  Tensor up, down;  // (H, C), (C, H)
  Tensor forward(const Tensor& x) const { return llmcc::linear_nobias(llmcc::gelu(llmcc::linear_nobias(x, up)), down); }
};

struct SoftMoe {
  Expert e1, e2;
  Tensor gate;   // (1, C): one gate logit per row
  Tensor alpha;  // (1): the mixture's weight in the residual, learned
  Tensor bias;   // (C)
  Tensor forward(const Tensor& x) const {                                              // x: (N, C)
    const Tensor g = llmcc::adgen::map_unary<sigmoid>(llmcc::linear_nobias(x, gate), "sigmoid");  // (N, 1)
    const Tensor mix = g * e1.forward(x) + (1.0f - g) * e2.forward(x);                 // (N, C)
    return x + alpha * mix - bias;                                                      // (N, C)
  }
};

LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("m") inline float loss(const SoftMoe& m, const Tensor& x, const Tensor& y) {
  return llmcc::mse_loss(m.forward(x), y);
}

}  // namespace moe
