// Scalar functions adgen differentiates: GPT-2's gelu written as plain float code, and a
// function using every supported maths call, locals and an if on the argument.
#pragma once

#include <cmath>

#include "llmcc/adgen.h"
#include "llmcc/ops/cross_entropy.h"

namespace scal {

LLMCC_ADGEN_ENTRY inline float gelu(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  const float u = k * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

LLMCC_ADGEN_ENTRY inline float silu(float x) { return x / (1.0f + expf(-x)); }

LLMCC_ADGEN_ENTRY inline float zoo(float x, float y) {
  float r = sqrtf(x * x + 1.0f) + logf(1.0f + y * y);
  if (x > 0.3f) {
    r = r * powf(fabsf(y) + 1.0f, 1.5f);
  } else {
    r = r - expf(0.5f * x) * y;
  }
  const float t = tanhf(r / 4.0f);
  return t * t + r;
}

// Returns in both branches of a final if/else.
LLMCC_ADGEN_ENTRY inline float leaky(float x, float slope) {
  if (x > 0.0f) {
    const float y = x * x;
    return y;
  } else if (x > -1.0f) {
    return slope * x;
  } else {
    return -slope + 0.5f * (x + 1.0f);
  }
}

// A plain scalar function (no marker) used as an element-wise op: adgen differentiates it for
// map_unary and writes the pullback call itself.
inline float soft(float x) { return x * tanhf(x) + 0.1f * x; }

LLMCC_ADGEN_ENTRY inline float soft_loss(const llmcc::Tensor& x, const llmcc::Tokens& targets) {
  return llmcc::cross_entropy(llmcc::adgen::map_unary<soft>(x, "soft"), targets, static_cast<int>(x.dim(1)), -1);
}

}  // namespace scal
