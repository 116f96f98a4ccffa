#include "ops/broadcast.h"

#include <string>

#include "kernels/ref/broadcast.h"
#include "llmcc/runtime.h"
#include "ops/adjoint.h"
#include "ops/check.h"

namespace llmcc {
namespace {

// How `small` broadcasts onto `full`, or nothing when it does not.
std::optional<cpu::Broadcast> broadcast_onto(const Shape& full, const Shape& small) {
  const std::int64_t n = full.numel();
  const int nd = full.ndim(), sd = small.ndim();
  if (nd == 0 || n == 0) return std::nullopt;
  const std::int64_t C = full[nd - 1], R = n / C;
  if (small.numel() == 1) return cpu::Broadcast{cpu::BroadcastAxis::Scalar, R, C};
  if (sd >= 1 && sd <= nd && small[sd - 1] == C && small.numel() == C)
    return cpu::Broadcast{cpu::BroadcastAxis::Row, R, C};
  if (sd == nd && small[sd - 1] == 1) {
    for (int i = 0; i + 1 < nd; ++i)
      if (small[i] != full[i]) return std::nullopt;
    return cpu::Broadcast{cpu::BroadcastAxis::Column, R, C};
  }
  return std::nullopt;
}

// "(3)", "(1, 3)", "(2, 1)": the shapes a broadcast operand may have against `full`.
std::string forms(const Shape& full) {
  const int nd = full.ndim();
  std::string row = "(" + std::to_string(full[nd - 1]) + ")";
  std::string col = "(";
  for (int i = 0; i < nd; ++i) col += (i ? ", " : "") + std::to_string(i + 1 < nd ? full[i] : 1);
  col += ")";
  return "a row " + row + ", a column " + col + " or one element";
}

}  // namespace

BinaryShapes binary_shapes(const char* op, const Tensor& a, const Tensor& b, bool either_side) {
  check::defined(op, "a", a);
  check::defined(op, "b", b);
  BinaryShapes s;
  if (a.shape() == b.shape()) return s;
  // Two operands of one element: the one with more axes is the full one, as it is whenever its
  // axes are longer than 1, so that a program's shapes are the same when all its sizes are 1.
  const bool b_has_more_axes = a.numel() == 1 && b.numel() == 1 && b.ndim() > a.ndim();
  if (!b_has_more_axes && (s.broadcast = broadcast_onto(a.shape(), b.shape()))) return s;
  if (either_side && (s.broadcast = broadcast_onto(b.shape(), a.shape()))) {
    s.swapped = true;
    return s;
  }
  if (b_has_more_axes)
    fail(op, "a has shape " + a.shape().str() + ", fewer axes than b's " + b.shape().str() +
                 ": the result would have b's shape, and " + op +
                 " broadcasts only its right operand (write -(b - a))");
  if (a.ndim() == 0 || a.numel() == 0)
    fail(op, "b has shape " + b.shape().str() + ", expected " + a.shape().str() + " (the shape of a)");
  fail(op, "b has shape " + b.shape().str() + ", expected " + a.shape().str() + " (the shape of a), " +
               forms(a.shape()) + (either_side ? " (or a one of these against b)" : ""));
}

void broadcast_forward(cpu::BinaryKind kind, const BinaryShapes& s, const Tensor& a, const Tensor& b, Tensor& out) {
  const Tensor& full = s.swapped ? b : a;   // the output's shape
  const Tensor& small = s.swapped ? a : b;  // one value, a row or a column
  // Swapped operands are add's or mul's: both commute.
  if (kernel_mode() == KernelMode::Reference) {
    ref::broadcast_forward(kind, out.f32(), full.f32(), small.f32(), *s.broadcast);
  } else {
    cpu::broadcast_forward(kind, out.f32(), full.f32(), small.f32(), *s.broadcast);
  }
}

void broadcast_pullback(const char* op, cpu::BinaryKind kind, const BinaryShapes& s, const Tensor& a, const Tensor& b,
                        const Tensor& d_out, Tensor* d_a, Tensor* d_b) {
  const Tensor& full = s.swapped ? b : a;
  const Tensor& small = s.swapped ? a : b;
  check::same_shape(op, s.swapped ? "b" : "a", full, "d_out", d_out);
  check::adjoint(op, "d_a", d_a, a);
  check::adjoint(op, "d_b", d_b, b);
  Tensor* d_full = s.swapped ? d_b : d_a;   // shape of full
  Tensor* d_small = s.swapped ? d_a : d_b;  // shape of small
  bool overwrite = false;
  float* df = adjoint_data(d_full, &overwrite);
  float* ds = d_small ? d_small->f32() : nullptr;
  if (kernel_mode() == KernelMode::Reference) {
    ref::broadcast_backward(kind, df, ds, full.f32(), small.f32(), d_out.f32(), *s.broadcast);
  } else {
    cpu::broadcast_backward(kind, df, ds, full.f32(), small.f32(), d_out.f32(), *s.broadcast, overwrite);
  }
}

}  // namespace llmcc
