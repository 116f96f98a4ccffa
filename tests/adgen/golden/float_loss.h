// Golden: float arithmetic on losses, with a float argument and a float local reassigned.
#pragma once
#include "models/toy_rules.h"
namespace g_float {
using llmcc::Tensor;
LLMCC_ADGEN_ENTRY inline float loss(const Tensor& a, const Tensor& b, float mix) {
  float l = toy::sumsq(a) * mix;
  l += toy::sumsq(b) / (1.0f + mix);
  return -l;
}
}  // namespace g_float
