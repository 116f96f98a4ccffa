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
  cpu::bf16_to_floats(static_cast<const std::uint16_t*>(w.raw()), wide.f32(), w.numel());
  return wide;
}

}  // namespace llmcc
