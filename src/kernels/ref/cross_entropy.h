// Reference kernels for cross_entropy: scalar loops, templated on the scalar type so that
// gradient tests can run them in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// lse[n] = log sum_{v < V} exp(logits[n, v]) for every row (max-subtracted, summed in double);
// returns the mean over non-ignored rows of lse[n] - logits[n, targets[n]] (0 when none) and
// writes their number to *count.  logits: (N, Vp), only v < V read; targets, lse: (N).
template <class T>
double cross_entropy_forward(T* lse, std::int64_t* count, const T* logits, const std::int32_t* targets, std::int64_t N,
                             std::int64_t V, std::int64_t Vp, std::int32_t ignore_index) {
  double loss = 0.0;
  std::int64_t kept = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    const T* row = logits + n * Vp;
    T m = row[0];
    for (std::int64_t v = 1; v < V; ++v) m = row[v] > m ? row[v] : m;
    double s = 0.0;
    for (std::int64_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(row[v] - m));
    lse[n] = m + static_cast<T>(std::log(s));
    if (targets[n] == ignore_index) continue;
    loss += static_cast<double>(lse[n]) - static_cast<double>(row[targets[n]]);
    ++kept;
  }
  *count = kept;
  return kept > 0 ? loss / static_cast<double>(kept) : 0.0;
}

// d_logits[n, v] += scale * (exp(logits[n, v] - lse[n]) - [v == targets[n]]) for v < V and
// non-ignored rows; scale = d_out / count.  logits, d_logits: (N, Vp); lse, targets: (N).
template <class T>
void cross_entropy_backward(T* d_logits, const T* logits, const T* lse, const std::int32_t* targets, T scale,
                            std::int64_t N, std::int64_t V, std::int64_t Vp, std::int32_t ignore_index) {
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    const T* row = logits + n * Vp;
    T* d = d_logits + n * Vp;
    for (std::int64_t v = 0; v < V; ++v) {
      const T p = std::exp(row[v] - lse[n]);
      d[v] += scale * (p - (v == targets[n] ? T(1) : T(0)));
    }
  }
}

// A row's max over v < V, and in double its exp-sum s = sum_v e_v (e_v = exp(row[v] - max)) and
// st = sum_v e_v t[v].
template <class T>
struct RowSums {
  T m;
  double s, st;
};
template <class T>
RowSums<T> row_sums(const T* row, const T* t, std::int64_t V) {
  RowSums<T> r{row[0], 0.0, 0.0};
  for (std::int64_t v = 1; v < V; ++v) r.m = row[v] > r.m ? row[v] : r.m;
  for (std::int64_t v = 0; v < V; ++v) {
    const double e = std::exp(static_cast<double>(row[v] - r.m));
    r.s += e;
    r.st += e * static_cast<double>(t[v]);
  }
  return r;
}

// The tangent of the loss along t (logits' tangent): (1 / count) sum over non-ignored rows of
// sum_{v < V} p[n, v] t[n, v] - t[n, targets[n]], p = softmax(logits[n, :V]) (0 when count is
// 0); *count as above.  logits, t: (N, Vp); targets: (N).
template <class T>
double cross_entropy_tangent_forward(std::int64_t* count, const T* logits, const T* t, const std::int32_t* targets,
                                     std::int64_t N, std::int64_t V, std::int64_t Vp, std::int32_t ignore_index) {
  double sum = 0.0;
  std::int64_t kept = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    const T* tr = t + n * Vp;
    const auto r = row_sums(logits + n * Vp, tr, V);
    sum += r.st / r.s - static_cast<double>(tr[targets[n]]);
    ++kept;
  }
  *count = kept;
  return kept > 0 ? sum / static_cast<double>(kept) : 0.0;
}

// With g = d_out / count, for v < V and non-ignored rows (s_n = sum_v p[n, v] t[n, v]):
//   d_logits[n, v] += g p[n, v] (t[n, v] - s_n),  d_t[n, v] += g (p[n, v] - [v == targets[n]]);
// either may be null (skipped).  logits, t, d_logits, d_t: (N, Vp); targets: (N).
template <class T>
void cross_entropy_tangent_backward(T* d_logits, T* d_t, const T* logits, const T* t, const std::int32_t* targets, T g,
                                    std::int64_t N, std::int64_t V, std::int64_t Vp, std::int32_t ignore_index) {
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    const T* row = logits + n * Vp;
    const T* tr = t + n * Vp;
    const auto r = row_sums(row, tr, V);
    const T sn = static_cast<T>(r.st / r.s);
    for (std::int64_t v = 0; v < V; ++v) {
      const T p = static_cast<T>(std::exp(static_cast<double>(row[v] - r.m)) / r.s);
      if (d_logits) d_logits[n * Vp + v] += g * p * (tr[v] - sn);
      if (d_t) d_t[n * Vp + v] += g * (p - (v == targets[n] ? T(1) : T(0)));
    }
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
