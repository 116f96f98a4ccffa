// view: consecutive elements of a tensor seen with another shape, without copying. One op for
// three uses:
//   reshape        view(x, {B, K * C}, 0)       the same elements, another shape (concatenating
//                                               the K embeddings of a (B, K, C) tensor per row)
//   one slice      view(x, {B, D}, i * B * D)   x[i] of an (S, B, D) tensor
//   a run          view(x, shape, offset)       any numel(shape) consecutive elements
// The output shares x's storage (a handle, like every Tensor); nothing may write through it.
#pragma once

#include <cstdint>

#include "llmcc/tensor.h"

namespace llmcc {

// out = x's elements [offset, offset + numel(shape)) in row-major order, as a tensor of `shape`.
// x: any shape; 0 <= offset and offset + numel(shape) <= numel(x); shape and offset are config
// (no adjoint).
Tensor view(const Tensor& x, const Shape& shape, std::int64_t offset);

// d_x[offset + i] += d_out[i] for i < numel(shape) (flat indices); the rest of d_x is unchanged.
// d_out: `shape`; d_x: the shape of x, or null (skipped). `out` is not read.
void view_pullback(const Tensor& x, const Shape& shape, std::int64_t offset, const Tensor& out, const Tensor& d_out,
                   Tensor* d_x);

}  // namespace llmcc
