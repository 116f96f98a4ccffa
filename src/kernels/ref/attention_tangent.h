// Reference kernels for attention's tangent (adgen's forward mode): a plain softmax per query
// row, templated on the scalar type so gradient tests can run in double. Layout and head groups
// as attention's (kernels/ref/attention.h); tq, tk, tv share q's, k's and v's layout, out_t and
// its adjoint out's.
//
// For query row i of head h (kv head g = h / (NH / NKV)), j <= i, scale = 1 / sqrt(HS):
//   s_j  = scale q_i . k_j,   s'_j = scale (tq_i . k_j + q_i . tk_j),   p = softmax(s),
//   m'   = sum_j p_j s'_j,    p'_j = p_j (s'_j - m'),
//   out'_i = sum_j p'_j v_j + p_j tv_j.
// One (b, g) group (the query heads of kv head g in batch row b) touches only its own rows of
// every operand and adjoint, so groups can run in parallel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/attention_layout.h"
#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// Per query row: the scores s, their tangents s' and the probabilities p over j <= i, and m'.
template <class Real>
Real attention_tangent_row(Real* s, Real* st, Real* p, const Real* qi, const Real* tqi, const Real* k, const Real* tk,
                           int i, std::int64_t kv_base, const AttentionLayout& L) {
  const Real scale = Real(1) / std::sqrt(Real(L.HS));
  Real m = -std::numeric_limits<Real>::infinity();
  for (int j = 0; j <= i; ++j) {
    const Real* kj = k + kv_base + std::int64_t{j} * L.ld_kv;
    const Real* tkj = tk + kv_base + std::int64_t{j} * L.ld_kv;
    Real dot = 0, tdot = 0;
    for (int d = 0; d < L.HS; ++d) {
      dot += qi[d] * kj[d];
      tdot += tqi[d] * kj[d] + qi[d] * tkj[d];
    }
    s[j] = dot * scale;
    st[j] = tdot * scale;
    m = std::max(m, s[j]);
  }
  Real sum = 0;
  for (int j = 0; j <= i; ++j) {
    p[j] = std::exp(s[j] - m);
    sum += p[j];
  }
  Real mt = 0;
  for (int j = 0; j <= i; ++j) {
    p[j] /= sum;
    mt += p[j] * st[j];
  }
  return mt;
}

// out_t for the query heads of group (b, g); scratch: 3 T values.
template <class Real>
void attention_tangent_forward_group(Real* out_t, const Real* q, const Real* k, const Real* v, const Real* tq,
                                     const Real* tk, const Real* tv, const AttentionLayout& L, int b, int g,
                                     Real* scratch) {
  const int T = L.T, HS = L.HS, group = L.NH / L.NKV;
  Real *s = scratch, *st = scratch + T, *p = scratch + 2 * T;
  const std::int64_t kv_base = std::int64_t{b} * T * L.ld_kv + std::int64_t{g} * HS;  // row 0 of kv head g
  for (int h = g * group; h < (g + 1) * group; ++h) {
    for (int i = 0; i < T; ++i) {
      const std::int64_t qoff = (std::int64_t{b} * T + i) * L.ld_q + std::int64_t{h} * HS;
      const Real mt = attention_tangent_row(s, st, p, q + qoff, tq + qoff, k, tk, i, kv_base, L);
      Real* oi = out_t + (std::int64_t{b} * T + i) * L.ld_out + std::int64_t{h} * HS;
      for (int d = 0; d < HS; ++d) oi[d] = 0;
      for (int j = 0; j <= i; ++j) {
        const std::int64_t kvoff = kv_base + std::int64_t{j} * L.ld_kv;
        const Real pt = p[j] * (st[j] - mt);
        for (int d = 0; d < HS; ++d) oi[d] += pt * v[kvoff + d] + p[j] * tv[kvoff + d];
      }
    }
  }
}

// The pullback for group (b, g), with G = d_out_t's row, a_j = G . v_j, b_j = G . tv_j,
// A = sum_j p_j a_j:
//   d_tv_j += p_j G,   d_v_j += p'_j G,
//   ds'_j = p_j (a_j - A),   dp_j = a_j (s'_j - m') - A s'_j + b_j,
//   ds_j = p_j (dp_j - sum_l p_l dp_l),
//   d_q_i += scale (ds_j k_j + ds'_j tk_j),   d_k_j += scale (ds_j q_i + ds'_j tq_i),
//   d_tq_i += scale ds'_j k_j,   d_tk_j += scale ds'_j q_i.
// Null adjoints are skipped; adjoints are only added to, so they may alias each other.
// scratch: 4 T values.
template <class Real>
void attention_tangent_backward_group(Real* d_q, Real* d_k, Real* d_v, Real* d_tq, Real* d_tk, Real* d_tv,
                                      const Real* d_out_t, const Real* q, const Real* k, const Real* v, const Real* tq,
                                      const Real* tk, const Real* tv, const AttentionLayout& L, int b, int g,
                                      Real* scratch) {
  const int T = L.T, HS = L.HS, group = L.NH / L.NKV;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  Real *s = scratch, *st = scratch + T, *p = scratch + 2 * T, *dp = scratch + 3 * T;
  const std::int64_t kv_base = std::int64_t{b} * T * L.ld_kv + std::int64_t{g} * HS;
  for (int h = g * group; h < (g + 1) * group; ++h) {
    for (int i = 0; i < T; ++i) {
      const std::int64_t qoff = (std::int64_t{b} * T + i) * L.ld_q + std::int64_t{h} * HS;
      const Real* qi = q + qoff;
      const Real* tqi = tq + qoff;
      const Real* gi = d_out_t + (std::int64_t{b} * T + i) * L.ld_out + std::int64_t{h} * HS;
      const Real mt = attention_tangent_row(s, st, p, qi, tqi, k, tk, i, kv_base, L);
      Real A = 0;
      for (int j = 0; j <= i; ++j) {
        const std::int64_t kvoff = kv_base + std::int64_t{j} * L.ld_kv;
        Real a = 0, bt = 0;
        for (int d = 0; d < HS; ++d) {
          a += gi[d] * v[kvoff + d];
          bt += gi[d] * tv[kvoff + d];
        }
        dp[j] = a;  // a_j for now
        A += p[j] * a;
        s[j] = bt;  // b_j (the score itself is no longer needed)
      }
      Real P = 0;  // sum_l p_l dp_l
      for (int j = 0; j <= i; ++j) {
        const Real a = dp[j];
        dp[j] = a * (st[j] - mt) - A * st[j] + s[j];
        P += p[j] * dp[j];
        s[j] = a;  // a_j again, for ds'_j below
      }
      for (int j = 0; j <= i; ++j) {
        const std::int64_t kvoff = kv_base + std::int64_t{j} * L.ld_kv;
        const Real dst = p[j] * (s[j] - A);
        const Real ds = p[j] * (dp[j] - P);
        const Real pt = p[j] * (st[j] - mt);
        for (int d = 0; d < HS; ++d) {
          if (d_tv) d_tv[kvoff + d] += p[j] * gi[d];
          if (d_v) d_v[kvoff + d] += pt * gi[d];
          if (d_q) d_q[qoff + d] += scale * (ds * k[kvoff + d] + dst * tk[kvoff + d]);
          if (d_k) d_k[kvoff + d] += scale * (ds * qi[d] + dst * tqi[d]);
          if (d_tq) d_tq[qoff + d] += scale * dst * k[kvoff + d];
          if (d_tk) d_tk[kvoff + d] += scale * dst * qi[d];
        }
      }
    }
  }
}

// Every group in turn.
template <class Real>
void attention_tangent_forward(Real* out_t, const Real* q, const Real* k, const Real* v, const Real* tq, const Real* tk,
                               const Real* tv, const AttentionLayout& L) {
  std::vector<Real> scratch(3 * static_cast<std::size_t>(L.T));
  for (int b = 0; b < L.B; ++b)
    for (int g = 0; g < L.NKV; ++g)
      attention_tangent_forward_group(out_t, q, k, v, tq, tk, tv, L, b, g, scratch.data());
}

template <class Real>
void attention_tangent_backward(Real* d_q, Real* d_k, Real* d_v, Real* d_tq, Real* d_tk, Real* d_tv,
                                const Real* d_out_t, const Real* q, const Real* k, const Real* v, const Real* tq,
                                const Real* tk, const Real* tv, const AttentionLayout& L) {
  std::vector<Real> scratch(4 * static_cast<std::size_t>(L.T));
  for (int b = 0; b < L.B; ++b)
    for (int g = 0; g < L.NKV; ++g)
      attention_tangent_backward_group(d_q, d_k, d_v, d_tq, d_tk, d_tv, d_out_t, q, k, v, tq, tk, tv, L, b, g,
                                       scratch.data());
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
