#include "kernels/cpu/broadcast.h"

#include <algorithm>

#include "kernels/cpu/ordered_sum.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {
namespace {

// Memory-bound: below this many elements a thread team costs more than it saves.
constexpr std::int64_t kParallelMin = 32768;
// Columns a row vector's reduction sums at once: their double sums stay in a 2 KiB stack array.
constexpr std::int64_t kColumnBlock = 256;

// The value of small that element (r, c) goes with.
inline float small_at(const Broadcast& b, const float* small, std::int64_t r, std::int64_t c) {
  return b.axis == BroadcastAxis::Scalar ? small[0] : b.axis == BroadcastAxis::Row ? small[c] : small[r];
}

// Row r of out = full (op) small, for a small value per column (row vector) or one value.
void forward_row(BinaryKind kind, float* __restrict out, const float* __restrict full, const float* __restrict small,
                 const Broadcast& b, std::int64_t r) {
  const std::int64_t C = b.cols;
  float* o = out + r * C;
  const float* f = full + r * C;
  if (b.axis == BroadcastAxis::Row) {
    if (kind == BinaryKind::Add) {
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) o[c] = f[c] + small[c];
    } else if (kind == BinaryKind::Sub) {
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) o[c] = f[c] - small[c];
    } else {
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) o[c] = f[c] * small[c];
    }
    return;
  }
  const float s = small_at(b, small, r, 0);
  if (kind == BinaryKind::Add) {
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] = f[c] + s;
  } else if (kind == BinaryKind::Sub) {
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] = f[c] - s;
  } else {
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) o[c] = f[c] * s;
  }
}

}  // namespace

void broadcast_forward(BinaryKind kind, float* out, const float* full, const float* small, const Broadcast& b) {
  const std::int64_t n = b.rows * b.cols;
  if (b.axis == BroadcastAxis::Scalar) {
    // One long row: split by elements, not by the single row.
    const Broadcast one{BroadcastAxis::Scalar, 1, 0};
    parallel_for(
        n, n > kParallelMin,
        [&](std::int64_t begin, std::int64_t end) {
          Broadcast part = one;
          part.cols = end - begin;
          forward_row(kind, out + begin, full + begin, small, part, 0);
        },
        kLineFloats);
    return;
  }
  parallel_for(b.rows, n > kParallelMin, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) forward_row(kind, out, full, small, b, r);
  });
}

void broadcast_backward(BinaryKind kind, float* d_full, float* d_small, const float* full, const float* small,
                        const float* d_out, const Broadcast& b, bool overwrite_full) {
  const std::int64_t R = b.rows, C = b.cols, n = R * C;
  if (d_full) {
    // d_full = or += d_out, times the small value for mul.
    parallel_for(R, n > kParallelMin, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        float* __restrict d = d_full + r * C;
        const float* __restrict g = d_out + r * C;
        if (kind != BinaryKind::Mul) {
          if (overwrite_full) {
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) d[c] = g[c];
          } else {
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) d[c] += g[c];
          }
        } else if (b.axis == BroadcastAxis::Row) {
          if (overwrite_full) {
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) d[c] = g[c] * small[c];
          } else {
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) d[c] += g[c] * small[c];
          }
        } else {
          const float s = small_at(b, small, r, 0);
          if (overwrite_full) {
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) d[c] = g[c] * s;
          } else {
#pragma omp simd
            for (std::int64_t c = 0; c < C; ++c) d[c] += g[c] * s;
          }
        }
      }
    });
  }
  if (!d_small) return;
  const bool mul = kind == BinaryKind::Mul;
  const double sign = kind == BinaryKind::Sub ? -1.0 : 1.0;
  const auto term = [&](std::int64_t i) {
    return mul ? static_cast<double>(d_out[i]) * full[i] : static_cast<double>(d_out[i]);
  };
  switch (b.axis) {
    case BroadcastAxis::Scalar:
      d_small[0] += static_cast<float>(sign * parallel_ordered_sum<double>(n, n >= kParallelMin, term));
      return;
    case BroadcastAxis::Column:
      // Row r's sum, in ordered_sum's fixed order; rows in parallel.
      parallel_for(R, n > kParallelMin, [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) {
          const std::int64_t at = r * C;
          d_small[r] += static_cast<float>(sign * ordered_sum<double>(C, [&](std::int64_t c) { return term(at + c); }));
        }
      });
      return;
    case BroadcastAxis::Row: {
      // Column c's sum runs down the rows in order; blocks of columns in parallel.
      const std::int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
      parallel_for(blocks, n > kParallelMin, [&](std::int64_t k0, std::int64_t k1) {
        double acc[kColumnBlock];
        for (std::int64_t k = k0; k < k1; ++k) {
          const std::int64_t c0 = k * kColumnBlock, width = std::min(kColumnBlock, C - c0);
          std::fill(acc, acc + width, 0.0);
          for (std::int64_t r = 0; r < R; ++r) {
            const std::int64_t at = r * C + c0;
#pragma omp simd
            for (std::int64_t c = 0; c < width; ++c) acc[c] += term(at + c);
          }
          for (std::int64_t c = 0; c < width; ++c) d_small[c0 + c] += static_cast<float>(sign * acc[c]);
        }
      });
      return;
    }
  }
}

}  // namespace llmcc::cpu
