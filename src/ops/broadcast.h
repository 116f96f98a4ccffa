// The front ends' shape rule for add, sub and mul: the output has the shape of the "full"
// operand; the other is either of the same shape, one element (a scalar, any shape of one
// element), a row vector ((C) or (1, ..., 1, C), one value per last-axis index) or a column
// vector (the full shape with its last axis 1, one value per row of C). Of two operands of one
// element, the full one is the one with more axes (a's when they have as many). add and mul take
// the broadcast operand on either side; sub only on the right (write -(x - row) for row - x).
#pragma once

#include <optional>

#include "kernels/cpu/broadcast.h"
#include "llmcc/tensor.h"

namespace llmcc {

struct BinaryShapes {
  std::optional<cpu::Broadcast> broadcast;  // empty: a and b have the same shape
  bool swapped = false;                     // a is the broadcast operand, b the full one
};

// Validates a and b for `op` (a null tensor, shapes that do not broadcast: llmcc::Error naming
// b and every shape it could have, or a when only a broadcasts and `either_side` is false).
BinaryShapes binary_shapes(const char* op, const Tensor& a, const Tensor& b, bool either_side);
// The output's shape: a's, or b's when swapped.
inline const Shape& binary_out_shape(const BinaryShapes& s, const Tensor& a, const Tensor& b) {
  return s.swapped ? b.shape() : a.shape();
}

// The forward of a broadcast (s.broadcast set) into out, on the kernels of the kernel mode.
void broadcast_forward(cpu::BinaryKind kind, const BinaryShapes& s, const Tensor& a, const Tensor& b, Tensor& out);
// Its pullback: d_out has the output's shape (checked), d_a and d_b their primals' (checked);
// the broadcast operand's adjoint receives the sums over what each of its values went to.
void broadcast_pullback(const char* op, cpu::BinaryKind kind, const BinaryShapes& s, const Tensor& a, const Tensor& b,
                        const Tensor& d_out, Tensor* d_a, Tensor* d_b);

}  // namespace llmcc
