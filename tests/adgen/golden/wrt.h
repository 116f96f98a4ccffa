// Golden: the gradient only with respect to the model (the input x gets no adjoint).
#pragma once
#include "models/toy_rules.h"
namespace g_wrt {
using llmcc::Tensor;
struct Linear {
  Tensor w;  // (C, OC)
};
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("m") inline float loss(const Linear& m, const Tensor& x, float s) {
  return toy::sumsq(toy::scale_by(toy::matmul(x, m.w), s));
}
}  // namespace g_wrt
