// The strides of a GEMM operand as used (op(X), transposes folded in): element (r, c) of op(X)
// is X[r * row + c * col]. X stored as op(X) (trans false, leading dimension ld): row = ld, col =
// 1; stored transposed: row = 1, col = ld. One of the two is always 1.
#pragma once

#include <cstddef>

namespace llmcc::cpu {

struct OperandStrides {
  std::ptrdiff_t row, col;
};

inline OperandStrides operand_strides(bool trans, int ld) {
  return trans ? OperandStrides{1, static_cast<std::ptrdiff_t>(ld)} : OperandStrides{static_cast<std::ptrdiff_t>(ld), 1};
}

}  // namespace llmcc::cpu
