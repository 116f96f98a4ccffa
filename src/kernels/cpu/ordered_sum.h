// Sums whose order of additions is fixed by this source, not by the compiler.
//
// An `omp simd reduction(+ : s)` loop lets the compiler keep as many partial sums as its vectors
// have lanes and add them up in an order of its choosing, and both follow the tuning: GCC's
// Intel tunings (-mtune=icelake-server, sapphirerapids, ...) vectorise with 256-bit registers
// where the AMD ones use 512, so a build that differs only in -mtune (or -mprefer-vector-width)
// rounds sums differently. These helpers keep kSumLanes partial sums themselves: lane l adds the
// terms l, l + 16, l + 32, ... in that order, the last n % 16 terms go to lanes 0 .. n % 16 - 1,
// and the lanes are added in a fixed halving tree. Each lane is its own chain of additions, so
// the compiler may vectorise across lanes with any register width (one zmm, two ymm, four xmm)
// without changing a bit: the result depends on the terms and n alone, on AVX2 and AVX-512
// alike. Sixteen lanes also give AVX2 two independent accumulators to hide the add latency.
//
//   const float ss = ordered_sum(C, [&](std::int64_t i) { return x[i] * x[i]; });
//   const auto [a, b] = ordered_sum2(C, [&](std::int64_t i) { return std::pair{g[i], g[i] * y[i]}; });
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {

inline constexpr int kSumLanes = 16;

// acc[0] after adding lanes pairwise: 8 + 8, 4 + 4, 2 + 2, 1 + 1.
template <class T>
inline T fold_lanes(T (&acc)[kSumLanes]) {
  for (int width = kSumLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

// No prefetching: the terms' loads are left to the hardware prefetchers.
struct NoPrefetch {
  void operator()(std::int64_t) const {}
};

// The sum of term(i) for i in [0, n), accumulated in T. ahead(i) is called before each full
// group of terms i .. i + kSumLanes - 1 is added: a sum that streams from memory can request
// lines further on there.
template <class T = float, class Term, class Ahead = NoPrefetch>
inline T ordered_sum(std::int64_t n, Term&& term, Ahead&& ahead = {}) {
  T acc[kSumLanes] = {};
  std::int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    ahead(i);
#pragma omp simd
    for (int l = 0; l < kSumLanes; ++l) acc[l] += term(i + l);
  }
  for (int l = 0; i + l < n; ++l) acc[l] += term(i + l);
  return fold_lanes(acc);
}

// Two sums in one pass: terms(i) returns both terms of element i as a std::pair.
template <class T = float, class Terms>
inline std::pair<T, T> ordered_sum2(std::int64_t n, Terms&& terms) {
  T a[kSumLanes] = {}, b[kSumLanes] = {};
  std::int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
#pragma omp simd
    for (int l = 0; l < kSumLanes; ++l) {
      const auto [ta, tb] = terms(i + l);
      a[l] += ta;
      b[l] += tb;
    }
  }
  for (int l = 0; i + l < n; ++l) {
    const auto [ta, tb] = terms(i + l);
    a[l] += ta;
    b[l] += tb;
  }
  return {fold_lanes(a), fold_lanes(b)};
}

// ordered_sum over a team of threads (when use_team(worth)): chunks of kSumChunk terms, each an
// ordered_sum, added in chunk order, so the thread count changes no bit. The partial sums of
// kSumBatch chunks at a time are held on the stack (8 KiB in double): no heap allocation.
// ahead(i) as in ordered_sum, with i counted from 0 over all n terms.
inline constexpr std::int64_t kSumChunk = 1 << 14, kSumBatch = 1024;
template <class T = float, class Term, class Ahead = NoPrefetch>
T parallel_ordered_sum(std::int64_t n, bool worth, Term&& term, Ahead&& ahead = {}) {
  const std::int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
  T total = 0;
  T partial[kSumBatch];
  for (std::int64_t c0 = 0; c0 < chunks; c0 += kSumBatch) {
    const std::int64_t count = std::min(kSumBatch, chunks - c0);
    const auto chunk_sum = [&](std::int64_t c) {
      const std::int64_t begin = (c0 + c) * kSumChunk;
      partial[c] = ordered_sum<T>(
          std::min(kSumChunk, n - begin), [&](std::int64_t i) { return term(begin + i); },
          [&](std::int64_t i) { ahead(begin + i); });
    };
    if (use_team(worth && count > 1)) {
#pragma omp parallel for schedule(static)
      for (std::int64_t c = 0; c < count; ++c) chunk_sum(c);
    } else {
      for (std::int64_t c = 0; c < count; ++c) chunk_sum(c);
    }
    for (std::int64_t c = 0; c < count; ++c) total += partial[c];
  }
  return total;
}

}  // namespace llmcc::cpu
