// Golden: locals declared without a value and assigned in each branch.
#pragma once
#include "models/toy_rules.h"
namespace g_default {
using llmcc::Tensor;
struct Net {
  bool squash = true;  // configuration
  Tensor w;
  Tensor forward(const Tensor& x) const {
    Tensor y;
    if (squash)
      y = toy::tanh_op(toy::matmul(x, w));
    else
      y = toy::matmul(x, w);
    return y;
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Net& m, const Tensor& x) {
  float scale;
  if (m.squash)
    scale = 2.0f;
  else
    scale = 0.5f;
  return scale * toy::sumsq(m.forward(x));
}
}  // namespace g_default
