#include "kernels/cpu/bidirectional_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/ordered_sum.h"

namespace llmcc::cpu {
namespace {

using i64 = std::int64_t;

// Multiply-adds (B * NH * T * T * HS) below which one thread is faster than a team.
constexpr i64 kParallelMin = 1 << 16;

// Per-thread scratch: grows once, so a steady-state call allocates nothing.
float* scratch(std::size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

// dst (HS, T) = head h of rows b*T .. b*T + T-1 of src (row stride C), transposed.
void transpose_head(float* __restrict dst, const float* __restrict src, i64 C, int T, int HS) {
  for (int j = 0; j < T; ++j)
    for (int d = 0; d < HS; ++d) dst[static_cast<i64>(d) * T + j] = src[j * C + d];
}

// out[c] (+)= alpha * sum_{j<J} w[j] * rows[j * ld + c] for c < n: a weighted sum of J rows.
// Every product the kernels need is one: scores (w = q_i, rows = K^T), outputs (w = p_i,
// rows = V), d_q (w = ds_i, rows = K). The columns go in chunks of 16 whose sums stay in
// registers over all J rows (accumulating in `out` instead chains a store and a reload per row).
void combine(float* __restrict out, const float* __restrict w, const float* __restrict rows, i64 ld, int J, int n,
             float alpha, bool accumulate) {
  constexpr int kW = 16;
  for (int c0 = 0; c0 < n; c0 += kW) {
    float acc[kW] = {};
    if (c0 + kW <= n) {
      for (int j = 0; j < J; ++j) {
        const float wj = w[j];
        const float* __restrict r = rows + j * ld + c0;
#pragma omp simd
        for (int c = 0; c < kW; ++c) acc[c] += wj * r[c];
      }
    } else {  // the last, partial chunk
      const int m = n - c0;
      for (int j = 0; j < J; ++j) {
        const float wj = w[j];
        const float* __restrict r = rows + j * ld + c0;
        for (int c = 0; c < m; ++c) acc[c] += wj * r[c];
      }
    }
    const int m = std::min(kW, n - c0);
    if (accumulate) {
      for (int c = 0; c < m; ++c) out[c0 + c] += alpha * acc[c];
    } else {
      for (int c = 0; c < m; ++c) out[c0 + c] = alpha * acc[c];
    }
  }
}

}  // namespace

void bidirectional_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, int B,
                                     int T, int NH, int HS) {
  const i64 C = i64{NH} * HS, heads = i64{B} * NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  parallel_for(heads, heads * T * T * HS >= kParallelMin, [&](i64 u0, i64 u1) {
    float* kt = scratch(static_cast<std::size_t>(HS) * T + T);  // (HS, T) keys, transposed
    float* p = kt + static_cast<i64>(HS) * T;                   // (T) one row's scores, then exp
    for (i64 u = u0; u < u1; ++u) {
      const i64 b = u / NH, h = u % NH, base = b * T * C + h * HS;  // row (b, 0), head h
      transpose_head(kt, k + base, C, T, HS);
      for (int i = 0; i < T; ++i) {
        combine(p, q + base + i * C, kt, T, HS, T, scale, false);
        float m = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < T; ++j) m = std::max(m, p[j]);
#pragma omp simd
        for (int j = 0; j < T; ++j) p[j] = fast_exp(p[j] - m);
        const float sum = ordered_sum(T, [&](i64 j) { return p[j]; });
        combine(out + base + i * C, p, v + base, C, T, HS, 1.0f / sum, false);
        if (lse) lse[u * T + i] = m + std::log(sum);
      }
    }
  });
}

// No __restrict on the adjoints: they may alias each other (q = k = v = x). All writes of head
// (b, h) go to its own slices, which only the thread running that head touches.
void bidirectional_attention_backward(float* d_q, float* d_k, float* d_v, const float* d_out, const float* q,
                                      const float* k, const float* v, const float* out, const float* lse, int B, int T,
                                      int NH, int HS) {
  const i64 C = i64{NH} * HS, heads = i64{B} * NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  parallel_for(heads, heads * T * T * HS >= kParallelMin, [&](i64 u0, i64 u1) {
    float* kt = scratch(2 * static_cast<std::size_t>(HS) * T + 2 * T);  // (HS, T) keys, transposed
    float* vt = kt + static_cast<i64>(HS) * T;                          // (HS, T) values, transposed
    float* p = vt + static_cast<i64>(HS) * T;                           // (T) p_ij of one row i
    float* ds = p + T;                                                  // (T) dO_i . v_j, then ds_ij
    for (i64 u = u0; u < u1; ++u) {
      const i64 b = u / NH, h = u % NH, base = b * T * C + h * HS;
      transpose_head(kt, k + base, C, T, HS);
      transpose_head(vt, v + base, C, T, HS);
      for (int i = 0; i < T; ++i) {
        const float* qi = q + base + i * C;       // (HS)
        const float* doi = d_out + base + i * C;  // (HS)
        const float* oi = out + base + i * C;     // (HS)
        const float D = ordered_sum(HS, [&](i64 d) { return doi[d] * oi[d]; });
        const float lse_i = lse[u * T + i];
        combine(p, qi, kt, T, HS, T, scale, false);
        combine(ds, doi, vt, T, HS, T, 1.0f, false);
#pragma omp simd
        for (int j = 0; j < T; ++j) {
          p[j] = fast_exp(p[j] - lse_i);
          ds[j] = scale * p[j] * (ds[j] - D);  // scale folded in: both d_q and d_k need it
        }
        for (int j = 0; j < T; ++j) {
          const i64 joff = base + j * C;
          const float pj = p[j], g = ds[j];
          if (d_v) {
#pragma omp simd
            for (int d = 0; d < HS; ++d) d_v[joff + d] += pj * doi[d];
          }
          if (d_k) {
#pragma omp simd
            for (int d = 0; d < HS; ++d) d_k[joff + d] += g * qi[d];
          }
        }
        if (d_q) combine(d_q + base + i * C, ds, k + base, C, T, HS, 1.0f, true);
      }
    }
  });
}

}  // namespace llmcc::cpu
