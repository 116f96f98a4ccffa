// Reference kernels for bidirectional (non-causal) multi-head attention: a plain two-pass
// softmax per query row with an O(T) scratch row, templated on the scalar type so gradient tests
// can run in double.
//
// Layout: q, k, v, out and their adjoints (B, T, NH * HS) dense, head h the HS floats from
// h * HS of each row; lse (B, NH, T). Scores s_ij = q_i . k_j / sqrt(HS) for all j < T.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/ref/scalar_loops.h"

LLMCC_REF_KERNELS_BEGIN

namespace llmcc::ref {

// out_i = sum_j softmax_j(s_i.) v_j;  lse_i = log sum_j exp(s_ij).  lse may be null.
template <class Real>
void bidirectional_attention_forward(Real* out, Real* lse, const Real* q, const Real* k, const Real* v, int B, int T,
                                     int NH, int HS) {
  const std::int64_t C = std::int64_t{NH} * HS;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  std::vector<Real> s(T);  // (T) scores of one query row
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < T; ++i) {
        const Real* qi = q + (std::int64_t{b} * T + i) * C + std::int64_t{h} * HS;
        Real m = -std::numeric_limits<Real>::infinity();
        for (int j = 0; j < T; ++j) {
          const Real* kj = k + (std::int64_t{b} * T + j) * C + std::int64_t{h} * HS;
          Real dot = 0;
          for (int d = 0; d < HS; ++d) dot += qi[d] * kj[d];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        Real sum = 0;
        for (int j = 0; j < T; ++j) {
          s[j] = std::exp(s[j] - m);
          sum += s[j];
        }
        Real* oi = out + (std::int64_t{b} * T + i) * C + std::int64_t{h} * HS;
        for (int d = 0; d < HS; ++d) oi[d] = 0;
        for (int j = 0; j < T; ++j) {
          const Real* vj = v + (std::int64_t{b} * T + j) * C + std::int64_t{h} * HS;
          for (int d = 0; d < HS; ++d) oi[d] += s[j] / sum * vj[d];
        }
        if (lse) lse[(std::int64_t{b} * NH + h) * T + i] = m + std::log(sum);
      }
    }
  }
}

// Recomputes p_ij = exp(s_ij - lse_i) and accumulates, with D_i = dO_i . O_i:
//   dV_j += p_ij dO_i,  ds_ij = p_ij (dO_i . v_j - D_i),
//   dQ_i += scale ds_ij k_j,  dK_j += scale ds_ij q_i.
// Null adjoints are skipped; adjoints are only ever added to, so they may alias each other.
template <class Real>
void bidirectional_attention_backward(Real* d_q, Real* d_k, Real* d_v, const Real* d_out, const Real* q, const Real* k,
                                      const Real* v, const Real* out, const Real* lse, int B, int T, int NH, int HS) {
  const std::int64_t C = std::int64_t{NH} * HS;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < T; ++i) {
        const std::int64_t ioff = (std::int64_t{b} * T + i) * C + std::int64_t{h} * HS;
        Real D = 0;
        for (int d = 0; d < HS; ++d) D += d_out[ioff + d] * out[ioff + d];
        const Real lse_i = lse[(std::int64_t{b} * NH + h) * T + i];
        for (int j = 0; j < T; ++j) {
          const std::int64_t joff = (std::int64_t{b} * T + j) * C + std::int64_t{h} * HS;
          Real s = 0, dp = 0;
          for (int d = 0; d < HS; ++d) {
            s += q[ioff + d] * k[joff + d];
            dp += d_out[ioff + d] * v[joff + d];
          }
          const Real p = std::exp(s * scale - lse_i);
          const Real ds = p * (dp - D);
          for (int d = 0; d < HS; ++d) {
            if (d_v) d_v[joff + d] += p * d_out[ioff + d];
            if (d_q) d_q[ioff + d] += scale * ds * k[joff + d];
            if (d_k) d_k[joff + d] += scale * ds * q[ioff + d];
          }
        }
      }
    }
  }
}

}  // namespace llmcc::ref

LLMCC_REF_KERNELS_END
