// The f32 view of a weight an op accepts in bf16, for the reference kernels (which read f32):
// the tensor itself when it is f32, else a copy widened from its bf16 values in the current
// arena (exact: every bf16 is a float).
#pragma once

#include <cstdint>

#include "kernels/cpu/bf16.h"
#include "llmcc/arena.h"
#include "llmcc/tensor.h"

namespace llmcc {

inline Tensor widened(const Tensor& w) {
  if (w.dtype() == DType::F32) return w;
  Tensor wide = new_tensor(w.shape(), "bf16 weight widened");  // shape of w
  const auto* src = static_cast<const std::uint16_t*>(w.raw());
  float* dst = wide.f32();
  for (std::int64_t i = 0; i < w.numel(); ++i) dst[i] = cpu::bf16_to_float(src[i]);
  return wide;
}

}  // namespace llmcc
