// Golden: a function marked for checkpointing: its callers save only its inputs.
#pragma once
#include "models/toy_rules.h"
namespace g_ckpt {
using llmcc::Tensor;
struct Block {
  Tensor w1, w2;
  LLMCC_ADGEN_CHECKPOINT Tensor forward(const Tensor& x) const {
    return toy::matmul(toy::tanh_op(toy::matmul(x, w1)), w2);
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Block& b, const Tensor& x) { return toy::sumsq(b.forward(x)); }
}  // namespace g_ckpt
