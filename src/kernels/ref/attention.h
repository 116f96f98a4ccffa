// Reference kernels for causal grouped-query attention: a plain two-pass softmax per query row
// with an O(T) scratch row, templated on the scalar type so gradient tests can run in double.
//
// Layout (see kernels/attention_layout.h; HS = head size, heads are HS-wide slices of a row):
//   q, d_q      row (b, t) at (b*T + t) * ld_q,   NH heads
//   k, v, d_k, d_v  row (b, t) at (b*T + t) * ld_kv, NKV heads
//   out, d_out  row (b, t) at (b*T + t) * ld_out, NH heads
//   lse         (B, NH, T) dense
// Query head h uses kv head h / (NH / NKV); scores s_ij = q_i . k_j / sqrt(HS) for j <= i.
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

// out_i = sum_{j<=i} softmax_j(s_i.) v_j; lse_i = log sum_{j<=i} exp(s_ij). lse may be null.
template <class Real>
void attention_forward(Real* out, Real* lse, const Real* q, const Real* k, const Real* v, const AttentionLayout& L) {
  const int T = L.T, HS = L.HS, group = L.NH / L.NKV;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  std::vector<Real> s(T);  // (T) scores of one query row
  for (int b = 0; b < L.B; ++b) {
    for (int h = 0; h < L.NH; ++h) {
      const int kvh = h / group;
      for (int i = 0; i < T; ++i) {
        const Real* qi = q + (std::int64_t{b} * T + i) * L.ld_q + std::int64_t{h} * HS;
        Real m = -std::numeric_limits<Real>::infinity();
        for (int j = 0; j <= i; ++j) {
          const Real* kj = k + (std::int64_t{b} * T + j) * L.ld_kv + std::int64_t{kvh} * HS;
          Real dot = 0;
          for (int d = 0; d < HS; ++d) dot += qi[d] * kj[d];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        Real sum = 0;
        for (int j = 0; j <= i; ++j) {
          s[j] = std::exp(s[j] - m);
          sum += s[j];
        }
        Real* oi = out + (std::int64_t{b} * T + i) * L.ld_out + std::int64_t{h} * HS;
        for (int d = 0; d < HS; ++d) oi[d] = 0;
        for (int j = 0; j <= i; ++j) {
          const Real* vj = v + (std::int64_t{b} * T + j) * L.ld_kv + std::int64_t{kvh} * HS;
          for (int d = 0; d < HS; ++d) oi[d] += s[j] / sum * vj[d];
        }
        if (lse) lse[(std::int64_t{b} * L.NH + h) * T + i] = m + std::log(sum);
      }
    }
  }
}

// Recomputes p_ij = exp(s_ij - lse_i) and accumulates, with D_i = dO_i . O_i:
//   dV_j += p_ij dO_i,  ds_ij = p_ij (dO_i . v_j - D_i),
//   dQ_i += scale ds_ij k_j,  dK_j += scale ds_ij q_i.
// Null adjoints are skipped; adjoints are only ever added to, so they may alias each other.
template <class Real>
void attention_backward(Real* d_q, Real* d_k, Real* d_v, const Real* d_out, const Real* q, const Real* k, const Real* v,
                        const Real* out, const Real* lse, const AttentionLayout& L) {
  const int T = L.T, HS = L.HS, group = L.NH / L.NKV;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  for (int b = 0; b < L.B; ++b) {
    for (int h = 0; h < L.NH; ++h) {
      const int kvh = h / group;
      for (int i = 0; i < T; ++i) {
        const std::int64_t qoff = (std::int64_t{b} * T + i) * L.ld_q + std::int64_t{h} * HS;
        const std::int64_t ooff = (std::int64_t{b} * T + i) * L.ld_out + std::int64_t{h} * HS;
        const Real* qi = q + qoff;
        const Real* oi = out + ooff;
        const Real* doi = d_out + ooff;
        Real D = 0;
        for (int d = 0; d < HS; ++d) D += doi[d] * oi[d];
        const Real lse_i = lse[(std::int64_t{b} * L.NH + h) * T + i];
        for (int j = 0; j <= i; ++j) {
          const std::int64_t kvoff = (std::int64_t{b} * T + j) * L.ld_kv + std::int64_t{kvh} * HS;
          const Real* kj = k + kvoff;
          const Real* vj = v + kvoff;
          Real s = 0, dp = 0;
          for (int d = 0; d < HS; ++d) {
            s += qi[d] * kj[d];
            dp += doi[d] * vj[d];
          }
          const Real p = std::exp(s * scale - lse_i);
          const Real ds = p * (dp - D);
          for (int d = 0; d < HS; ++d) {
            if (d_v) d_v[kvoff + d] += p * doi[d];
            if (d_q) d_q[qoff + d] += scale * ds * kj[d];
            if (d_k) d_k[kvoff + d] += scale * ds * qi[d];
          }
        }
      }
    }
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
