// Reference kernels for add, sub and mul with a broadcast second operand (kernels/cpu/broadcast.h
// describes the three shapes): scalar loops, templated on the scalar type so that gradient tests
// can run them in double.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

using cpu::BinaryKind;
using cpu::Broadcast;
using cpu::BroadcastAxis;

// The index into small of element (r, c).
inline std::int64_t broadcast_index(const Broadcast& b, std::int64_t r, std::int64_t c) {
  return b.axis == BroadcastAxis::Scalar ? 0 : b.axis == BroadcastAxis::Row ? c : r;
}

// out = full (op) small  (rows, cols)
template <class T>
void broadcast_forward(BinaryKind kind, T* out, const T* full, const T* small, const Broadcast& b) {
  for (std::int64_t r = 0; r < b.rows; ++r)
    for (std::int64_t c = 0; c < b.cols; ++c) {
      const std::int64_t i = r * b.cols + c;
      const T s = small[broadcast_index(b, r, c)];
      out[i] = kind == BinaryKind::Add ? full[i] + s : kind == BinaryKind::Sub ? full[i] - s : full[i] * s;
    }
}

// d_full += d/d_full, d_small += the sums (accumulated in double); null adjoints are skipped.
template <class T>
void broadcast_backward(BinaryKind kind, T* d_full, T* d_small, const T* full, const T* small, const T* d_out,
                        const Broadcast& b) {
  const std::int64_t count = b.axis == BroadcastAxis::Scalar ? 1 : b.axis == BroadcastAxis::Row ? b.cols : b.rows;
  std::vector<double> sums(static_cast<std::size_t>(count), 0.0);
  for (std::int64_t r = 0; r < b.rows; ++r)
    for (std::int64_t c = 0; c < b.cols; ++c) {
      const std::int64_t i = r * b.cols + c, j = broadcast_index(b, r, c);
      if (d_full) d_full[i] += kind == BinaryKind::Mul ? d_out[i] * small[j] : d_out[i];
      const double g = static_cast<double>(d_out[i]);
      sums[static_cast<std::size_t>(j)] += kind == BinaryKind::Mul   ? g * static_cast<double>(full[i])
                                           : kind == BinaryKind::Sub ? -g
                                                                     : g;
    }
  if (d_small)
    for (std::int64_t j = 0; j < count; ++j) d_small[j] += static_cast<T>(sums[static_cast<std::size_t>(j)]);
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
