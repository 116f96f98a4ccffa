// Golden: a scalar function with a local, an if on the argument and a maths call.
#pragma once
#include <cmath>
#include "llmcc/adgen.h"
namespace g_scalar {
LLMCC_ADGEN_ENTRY inline float softplus(float x) {
  float y = x;
  if (x < 20.0f) y = logf(1.0f + expf(x));
  return y;
}
}  // namespace g_scalar
