// The fast attention kernels as they were before the blocked rewrite (commit 60bff8d: one query
// row at a time, dot products over HS, scalar exp per score), kept only so bench_attention can
// time old and new in the same run. Not part of the library.
#include "kernels/attention_layout.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace llmcc::cpu_baseline {
namespace {

constexpr int kRows = 4;      // forward: query rows per tile, so each loaded k_j serves 4 dots
constexpr int kKeys = 64;     // forward: keys per tile, so a row's softmax rescales once per tile
constexpr int kChunk = 16;    // forward: output columns kept in registers while summing P V
constexpr int kBwdKeys = 32;  // backward: keys per tile; their k, v, dk, dv rows stay in L1

// y += a * x  (n). y is an adjoint or output row, x an input row: they never overlap.
inline void axpy(float* __restrict y, float a, const float* __restrict x, int n) {
#pragma omp simd
  for (int d = 0; d < n; ++d) y[d] += a * x[d];
}

inline float dot(const float* __restrict a, const float* __restrict b, int n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// exp(x) for the arguments attention produces (x <= ~0: a score minus a running max or an lse).
// Plain arithmetic, so loops over it vectorise (std::exp does not without -ffast-math):
// x = n ln2 + r with |r| <= ln2/2, exp(r) by a degree-7 polynomial (Cephes expf coefficients),
// 2^n from the exponent bits. Relative error ~2e-7. Clamped below at -87 (exp ~ 1.6e-38, the
// smallest normal range), which is 0 next to any softmax sum.
inline float fast_exp(float x) {
  x = std::max(x, -87.0f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // Cody-Waite: ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  return p * two_n;
}

// One tile of the forward: query rows i0 .. i0+R-1 of head h in batch b (all < T). R = kRows
// for full tiles, 1 for the rows left over at the end of a sequence.
template <int R>
void forward_tile(float* out, float* lse, const float* q, const float* k, const float* v, int b,
                  int h, int i0, const AttentionLayout& L) {
  const int T = L.T, NH = L.NH, NKV = L.NKV, HS = L.HS;
  const std::int64_t Ckv = L.ld_kv;
  const int kvh = h / (NH / NKV);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const float* kb = k + std::int64_t{b} * T * Ckv + std::int64_t{kvh} * HS;  // row j at j*Ckv
  const float* vb = v + std::int64_t{b} * T * Ckv + std::int64_t{kvh} * HS;
  const int i_last = i0 + R - 1;

  const float* qr[R];  // (HS) each
  float* orow[R];      // (HS) each: the output row doubles as the unnormalised accumulator
  float m[R], l[R];    // running max and running sum of exp(s - m)
  for (int r = 0; r < R; ++r) {
    const std::int64_t row = std::int64_t{b} * T + i0 + r;
    qr[r] = q + row * L.ld_q + std::int64_t{h} * HS;
    orow[r] = out + row * L.ld_out + std::int64_t{h} * HS;
    m[r] = -std::numeric_limits<float>::infinity();
    l[r] = 0.0f;
    std::fill(orow[r], orow[r] + HS, 0.0f);
  }

  float s[R][kKeys];  // scores, then probabilities (0 where masked), of the current tile
  for (int j0 = 0; j0 <= i_last; j0 += kKeys) {
    const int nj = std::min(j0 + kKeys, i_last + 1) - j0;  // keys in this tile
    // S = Q K^T for the tile; each k_j load serves R rows.
    for (int jj = 0; jj < nj; ++jj) {
      const float* kj = kb + std::int64_t{j0 + jj} * Ckv;
      if constexpr (R == 4) {
        const float *q0 = qr[0], *q1 = qr[1], *q2 = qr[2], *q3 = qr[3];
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
        for (int d = 0; d < HS; ++d) {
          const float kd = kj[d];
          a0 += q0[d] * kd;
          a1 += q1[d] * kd;
          a2 += q2[d] * kd;
          a3 += q3[d] * kd;
        }
        s[0][jj] = a0 * scale;
        s[1][jj] = a1 * scale;
        s[2][jj] = a2 * scale;
        s[3][jj] = a3 * scale;
      } else {
        for (int r = 0; r < R; ++r) s[r][jj] = dot(qr[r], kj, HS) * scale;
      }
    }
    for (int r = 0; r < R; ++r) {
      const int n = std::min(nj, i0 + r + 1 - j0);  // keys of this tile that row i0+r sees
      float mt = m[r];
      for (int jj = 0; jj < n; ++jj) mt = std::max(mt, s[r][jj]);
      const float corr = fast_exp(m[r] - mt);  // ~0 on the first tile, where m = -inf
      float sum = 0.0f;
      float* sr = s[r];
#pragma omp simd reduction(+ : sum)
      for (int jj = 0; jj < nj; ++jj) {
        const float p = jj < n ? fast_exp(sr[jj] - mt) : 0.0f;
        sr[jj] = p;
        sum += p;
      }
      l[r] = l[r] * corr + sum;
      m[r] = mt;
      if (corr != 1.0f) {
        float* o = orow[r];
#pragma omp simd
        for (int d = 0; d < HS; ++d) o[d] *= corr;
      }
    }
    // O += P V in 16-wide column chunks: the R accumulators stay in registers over the tile's
    // keys and each v_j chunk is loaded once for all R rows.
    int d0 = 0;
    for (; d0 + kChunk <= HS; d0 += kChunk) {
      float acc[R][kChunk];
      for (int r = 0; r < R; ++r) {
#pragma omp simd
        for (int dd = 0; dd < kChunk; ++dd) acc[r][dd] = orow[r][d0 + dd];
      }
      for (int jj = 0; jj < nj; ++jj) {
        const float* vj = vb + std::int64_t{j0 + jj} * Ckv + d0;
        for (int r = 0; r < R; ++r) {
          const float p = s[r][jj];
#pragma omp simd
          for (int dd = 0; dd < kChunk; ++dd) acc[r][dd] += p * vj[dd];
        }
      }
      for (int r = 0; r < R; ++r) {
#pragma omp simd
        for (int dd = 0; dd < kChunk; ++dd) orow[r][d0 + dd] = acc[r][dd];
      }
    }
    if (d0 < HS) {  // the last HS % 16 columns
      for (int r = 0; r < R; ++r) {
        for (int jj = 0; jj < nj; ++jj) {
          axpy(orow[r] + d0, s[r][jj], vb + std::int64_t{j0 + jj} * Ckv + d0, HS - d0);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const float inv = 1.0f / l[r];
    float* o = orow[r];
#pragma omp simd
    for (int d = 0; d < HS; ++d) o[d] *= inv;
    if (lse) lse[(std::int64_t{b} * NH + h) * T + i0 + r] = m[r] + std::log(l[r]);
  }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionLayout& L) {
  const int B = L.B, T = L.T, NH = L.NH;
  const std::int64_t tiles = (T + kRows - 1) / kRows;
  const std::int64_t tasks = std::int64_t{B} * NH * tiles;
  // Causal tiles differ in cost (tile i does ~i keys), hence dynamic; consecutive tasks share a
  // head, so a chunk reuses that head's K and V from cache.
#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const int i0 = static_cast<int>(t % tiles) * kRows;
    const int b = static_cast<int>(t / tiles) / NH, h = static_cast<int>(t / tiles) % NH;
    if (i0 + kRows <= T) {
      forward_tile<kRows>(out, lse, q, k, v, b, h, i0, L);
    } else {
      for (int i = i0; i < T; ++i) forward_tile<1>(out, lse, q, k, v, b, h, i, L);
    }
  }
}

void attention_backward(float* d_q, float* d_k, float* d_v, const float* d_out, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        const AttentionLayout& L) {
  if (!d_q && !d_k && !d_v) return;
  const int B = L.B, T = L.T, NH = L.NH, NKV = L.NKV, HS = L.HS;
  const std::int64_t Ckv = L.ld_kv;
  const int group = NH / NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int kvh = 0; kvh < NKV; ++kvh) {
      const std::int64_t kv0 = std::int64_t{b} * T * Ckv + std::int64_t{kvh} * HS;  // row j at j*Ckv
      for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
        const std::int64_t q0 = std::int64_t{b} * T * L.ld_q + std::int64_t{h} * HS;  // row i at i*ld_q
        const std::int64_t o0 = std::int64_t{b} * T * L.ld_out + std::int64_t{h} * HS;
        const float* lse_bh = lse + (std::int64_t{b} * NH + h) * T;                 // (T)
        // Key tiles outermost: a tile's k, v, dk, dv rows stay in cache while every query row
        // that sees them streams past.
        for (int j0 = 0; j0 < T; j0 += kBwdKeys) {
          const int j1 = std::min(j0 + kBwdKeys, T);
          for (int i = j0; i < T; ++i) {
            const std::int64_t qi_off = q0 + std::int64_t{i} * L.ld_q;
            const std::int64_t oi_off = o0 + std::int64_t{i} * L.ld_out;
            const float* qi = q + qi_off;
            const float* doi = d_out + oi_off;
            const float D = dot(doi, out + oi_off, HS);  // dO_i . O_i
            const float lse_i = lse_bh[i];
            const int je = std::min(j1, i + 1);
            for (int j = j0; j < je; ++j) {
              const std::int64_t kj_off = kv0 + std::int64_t{j} * Ckv;
              const float* kj = k + kj_off;
              const float* vj = v + kj_off;
              float sc = 0.0f, dp = 0.0f;
#pragma omp simd reduction(+ : sc, dp)
              for (int d = 0; d < HS; ++d) {
                sc += qi[d] * kj[d];
                dp += doi[d] * vj[d];
              }
              const float p = fast_exp(sc * scale - lse_i);
              const float ds = scale * p * (dp - D);
              // Separate loops, not one fused one: d_q, d_k and d_v may alias each other.
              if (d_v) axpy(d_v + kj_off, p, doi, HS);
              if (d_k) axpy(d_k + kj_off, ds, qi, HS);
              if (d_q) axpy(d_q + qi_off, ds, kj, HS);
            }
          }
        }
      }
    }
  }
}

}  // namespace llmcc::cpu_baseline
