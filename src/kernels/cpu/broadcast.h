// Fast kernels for add, sub and mul when the second operand broadcasts: one value for every
// element (a scalar), one per column of a row-major (rows, cols) view of the first operand (a
// row vector), or one per row (a column vector). Forward loops vectorise over columns; the
// reductions of the backward sum in double, each sum in an order fixed by the shapes alone, so
// neither the thread count nor the vector width changes a bit.
#pragma once

#include <cstdint>

namespace llmcc::cpu {

enum class BinaryKind { Add, Sub, Mul };
enum class BroadcastAxis {
  Scalar,  // small holds 1 value
  Row,     // small holds cols values, small[c] goes with column c
  Column,  // small holds rows values, small[r] goes with row r
};
struct Broadcast {
  BroadcastAxis axis = BroadcastAxis::Scalar;
  std::int64_t rows = 0, cols = 0;  // the full operand as a (rows, cols) matrix
};

// out = full (+, -, *) small, broadcast.  full, out: (rows, cols).
void broadcast_forward(BinaryKind kind, float* out, const float* full, const float* small, const Broadcast& b);
// d_full += d_out (add, sub) or d_out * small (mul), or = that with overwrite_full;
// d_small += the sum of d_out (add), minus it (sub) or the sum of d_out * full (mul) over the
// elements each small value went to. full is read only for mul's d_small, small only for mul's
// d_full. Null adjoints are skipped.
void broadcast_backward(BinaryKind kind, float* d_full, float* d_small, const float* full, const float* small,
                        const float* d_out, const Broadcast& b, bool overwrite_full = false);

}  // namespace llmcc::cpu
