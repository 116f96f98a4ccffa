// Parallel loops that never open a one-thread OpenMP region.
//
// libgomp allocates a team (about 1.5 KB) for every parallel region that runs on one thread
// (`if (false)`, num_threads(1), one thread in all, or nested): it caches only teams of several
// threads. A steady-state training step allocates nothing, so a small loop must not enter a
// region at all: these helpers branch in C++ and call the body directly when the work is small
// or only one thread would run it.
//
//   parallel_for(N, N * C >= kParallelElements, [&](std::int64_t begin, std::int64_t end) {
//     for (std::int64_t n = begin; n < end; ++n) ...row n...
//   });
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace llmcc::cpu {

// Whether a loop worth parallelising gets a region: only when that region will have several
// threads (not nested inside another region, more than one thread allowed).
inline bool use_team(bool worth) {
  return worth && !omp_in_parallel() && std::min(omp_get_max_threads(), omp_get_thread_limit()) > 1;
}

// [begin, end) of part `part` of `parts` contiguous parts of [0, n), split as OpenMP's
// schedule(static) splits a loop (the first n % parts parts one unit longer), in units of
// `grain` indices (the last part takes the remainder).
struct Range {
  std::int64_t begin, end;
};
inline Range static_range(std::int64_t n, int part, int parts, std::int64_t grain = 1) {
  const std::int64_t units = (n + grain - 1) / grain;
  const std::int64_t q = units / parts, r = units % parts;
  const std::int64_t first = part * q + std::min<std::int64_t>(part, r);
  const std::int64_t count = q + (part < r ? 1 : 0);
  return {std::min(n, first * grain), std::min(n, (first + count) * grain)};
}

// body(begin, end) over contiguous ranges covering [0, n): one range per thread of a team when
// use_team(worth), else body(0, n) on the calling thread. With grain 1 each thread gets the
// rows schedule(static) would give it; element-wise loops pass kLineFloats so that no two
// threads write the same cache line (for a 64-byte aligned array).
template <class Body>
void parallel_for(std::int64_t n, bool worth, Body&& body, std::int64_t grain = 1) {
  if (!use_team(worth)) {
    if (n > 0) body(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const Range r = static_range(n, omp_get_thread_num(), omp_get_num_threads(), grain);
    if (r.begin < r.end) body(r.begin, r.end);
  }
}

// body() once per thread of a team when use_team(worth), else once on the calling thread. For
// kernels with per-thread state: inside body, omp_get_num_threads() and omp_get_thread_num()
// are 1 and 0 when it runs alone, and orphaned `#pragma omp for schedule(static)` loops and
// barriers run serially there without touching the runtime's allocator (other schedules do
// allocate a work share outside a region: use static only).
template <class Body>
void parallel_region(bool worth, Body&& body) {
  if (!use_team(worth)) {
    body();
    return;
  }
#pragma omp parallel
  body();
}

// Floats per 64-byte cache line: the grain of element-wise loops.
constexpr std::int64_t kLineFloats = 16;

}  // namespace llmcc::cpu
