// Fast causal grouped-query attention: blocked flash-style forward and backward whose products
// are register-blocked small GEMMs (design in kernels/cpu/attention.h).
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/ordered_sum.h"
#include "llmcc/error.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace llmcc::cpu {
namespace {

using i64 = std::int64_t;

// ---- a few SIMD operations, for AVX-512, AVX2 + FMA, or neither -------------------------------
// vec: W floats. load_n / store_n touch only the first n lanes (0 < n <= W); load_n zeroes the rest.
#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics (max, min, cvtps, slli, ...) pass _mm512_undefined_*() as the
// unused merge source, which -Wmaybe-uninitialized reports wherever they are inlined (GCC bug
// 105593, fixed in 13); under -Werror that fails the build on every AVX-512 machine. The
// warning is off for these wrappers only (GCC applies the pragma at their inlined call sites).
#pragma GCC diagnostic push
#if !defined(__clang__)  // Clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
using vec = __m512;
constexpr int W = 16;
constexpr int kMR = 8, kNV = 2;  // micro-tile: 8 rows x 32 columns, 16 accumulators of 32
constexpr int kBlock = 64;
inline vec vzero() { return _mm512_setzero_ps(); }
inline vec vset1(float x) { return _mm512_set1_ps(x); }
inline vec vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, vec x) { _mm512_storeu_ps(p, x); }
inline vec vfma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
inline __mmask16 lanes(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
inline vec load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(lanes(n), p); }
inline void store_n(float* p, vec x, int n) { _mm512_mask_storeu_ps(p, lanes(n), x); }
inline vec vadd(vec a, vec b) { return _mm512_add_ps(a, b); }
inline vec vsub(vec a, vec b) { return _mm512_sub_ps(a, b); }
inline vec vmul(vec a, vec b) { return _mm512_mul_ps(a, b); }
inline vec vmax(vec a, vec b) { return _mm512_max_ps(a, b); }
inline vec vmin(vec a, vec b) { return _mm512_min_ps(a, b); }
inline vec vexp2i(vec k) {  // 2^k for integral k in [-126, 127]
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_castsi512_ps(e);
}
// Lanes below n (0 <= n <= W) take `fill`.
inline vec fill_below(vec x, int n, vec fill) { return _mm512_mask_blend_ps(lanes(n), x, fill); }
#pragma GCC diagnostic pop
#elif defined(__AVX2__) && defined(__FMA__)
using vec = __m256;
constexpr int W = 8;
constexpr int kMR = 6, kNV = 2;  // micro-tile: 6 rows x 16 columns, 12 accumulators of 16
constexpr int kBlock = 48;
inline vec vzero() { return _mm256_setzero_ps(); }
inline vec vset1(float x) { return _mm256_set1_ps(x); }
inline vec vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, vec x) { _mm256_storeu_ps(p, x); }
inline vec vfma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
// Lane i is on when i < n: a window into 8 all-ones words followed by 8 zero words.
inline __m256i lanes(int n) {
  alignas(64) static constexpr std::int32_t kWindow[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kWindow + 8 - n));
}
inline vec load_n(const float* p, int n) { return _mm256_maskload_ps(p, lanes(n)); }
inline void store_n(float* p, vec x, int n) { _mm256_maskstore_ps(p, lanes(n), x); }
inline vec vadd(vec a, vec b) { return _mm256_add_ps(a, b); }
inline vec vsub(vec a, vec b) { return _mm256_sub_ps(a, b); }
inline vec vmul(vec a, vec b) { return _mm256_mul_ps(a, b); }
inline vec vmax(vec a, vec b) { return _mm256_max_ps(a, b); }
inline vec vmin(vec a, vec b) { return _mm256_min_ps(a, b); }
inline vec vexp2i(vec k) {  // 2^k for integral k in [-126, 127]
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_castsi256_ps(e);
}
inline vec fill_below(vec x, int n, vec fill) { return _mm256_blendv_ps(x, fill, _mm256_castsi256_ps(lanes(n))); }
#else
constexpr int W = 4;
struct vec {
  float x[W];
};
constexpr int kMR = 4, kNV = 2;
constexpr int kBlock = 32;
inline vec vzero() { return vec{}; }
inline vec vset1(float a) { return vec{{a, a, a, a}}; }
inline vec vload(const float* p) { return vec{{p[0], p[1], p[2], p[3]}}; }
inline void vstore(float* p, vec a) { std::copy_n(a.x, W, p); }
inline vec vfma(vec a, vec b, vec c) {
  for (int i = 0; i < W; ++i) c.x[i] += a.x[i] * b.x[i];
  return c;
}
inline vec load_n(const float* p, int n) {
  vec a{};
  std::copy_n(p, n, a.x);
  return a;
}
inline void store_n(float* p, vec a, int n) { std::copy_n(a.x, n, p); }
template <class F>
inline vec lanewise(vec a, vec b, F f) {
  for (int i = 0; i < W; ++i) a.x[i] = f(a.x[i], b.x[i]);
  return a;
}
inline vec vadd(vec a, vec b) {
  return lanewise(a, b, [](float x, float y) { return x + y; });
}
inline vec vsub(vec a, vec b) {
  return lanewise(a, b, [](float x, float y) { return x - y; });
}
inline vec vmul(vec a, vec b) {
  return lanewise(a, b, [](float x, float y) { return x * y; });
}
inline vec vmax(vec a, vec b) {
  return lanewise(a, b, [](float x, float y) { return std::max(x, y); });
}
inline vec fill_below(vec x, int n, vec fill) {
  std::copy_n(fill.x, n, x.x);
  return x;
}
#endif

// exp of W floats. Without SIMD: fast_math.h's fast_exp per lane. With AVX2 / AVX-512: the same
// algorithm and constants as fast_exp (clamp to [-87, 88], x = k ln2 + r, degree-7 Taylor
// polynomial of e^r, 2^k through the exponent bits) written with intrinsics, because GCC 12 does
// not vectorise fast_exp's clamp in an `omp simd` loop (std::min/max under -ftrapping-math:
// "control flow in loop"), and a scalar exp per score would cost more than the block's products.
inline vec vexp(vec x) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  x = vmin(vmax(x, vset1(-87.0f)), vset1(88.0f));
  const vec round = vset1(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const vec k = vsub(vfma(x, vset1(1.44269504f), round), round);
  const vec r = vsub(vsub(x, vmul(k, vset1(0.693359375f))), vmul(k, vset1(-2.12194440e-4f)));
  vec p = vset1(1.0f / 5040.0f);
  p = vfma(p, r, vset1(1.0f / 720.0f));
  p = vfma(p, r, vset1(1.0f / 120.0f));
  p = vfma(p, r, vset1(1.0f / 24.0f));
  p = vfma(p, r, vset1(1.0f / 6.0f));
  p = vfma(p, r, vset1(0.5f));
  p = vfma(p, r, vset1(1.0f));
  p = vfma(p, r, vset1(1.0f));
  return vmul(p, vexp2i(k));
#else
  for (float& e : x.x) e = fast_exp(e);
  return x;
#endif
}

// kBlock: queries per block (the N of S^T, the M of P V and dQ) and keys per block (the M of
// S^T, dK and dV); a multiple of the micro-tile's rows and of the vector width, so full blocks
// have no ragged tiles.
static_assert(kBlock % kMR == 0 && kBlock % W == 0);

// ---- small GEMM: C (+)= A B on a block, register-blocked --------------------------------------
// A(i, k) = a[i * ars + k * acs] (any strides: its elements are broadcast one at a time), B's row
// k at b + k * ldb (contiguous columns), C's row i at c + i * ldc.
struct Operands {
  const float* a;
  i64 ars, acs;
  const float* b;
  i64 ldb;
  float* c;
  i64 ldc;
};

#if defined(__AVX512BF16__)
// The bf16 products' operands: bf16 pairs (bf16.h's bf16_pairs: two consecutive depth values in
// 32 bits, the even one in the low half), summed in fp32 by vdpbf16ps. A's pair (i, p) is
// a[i * ars + p * acs]; B's pair row p (depth 2p and 2p + 1 of every column) starts at b + p * ldb,
// one pair per column, columns contiguous.
struct PairOperands {
  const std::uint32_t* a;
  i64 ars, acs;
  const std::uint32_t* b;
  i64 ldb;
  float* c;
  i64 ldc;
};
#endif

// One micro-tile: M rows x NV vectors of C, K steps of depth (Operands: one depth value per
// step, fmadd; PairOperands: two, vdpbf16ps); the last vector has `tail` valid lanes when
// kPartial. kAcc: C += A B, else C = A B.
template <int M, int NV, bool kAcc, bool kPartial, class Ops>
void micro_tile(int K, const Ops& o, int tail) {
  vec acc[M][NV];
  for (int i = 0; i < M; ++i) {
    for (int v = 0; v < NV; ++v) {
      if constexpr (kAcc) {
        const float* c = o.c + i * o.ldc + v * W;
        acc[i][v] = (kPartial && v == NV - 1) ? load_n(c, tail) : vload(c);
      } else {
        acc[i][v] = vzero();
      }
    }
  }
  auto a = o.a;
  auto b = o.b;
  for (int k = 0; k < K; ++k, a += o.acs, b += o.ldb) {
    if constexpr (std::is_same_v<Ops, Operands>) {
      vec bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = (kPartial && v == NV - 1) ? load_n(b + v * W, tail) : vload(b + v * W);
      for (int i = 0; i < M; ++i) {
        const vec ai = vset1(a[i * o.ars]);
        for (int v = 0; v < NV; ++v) acc[i][v] = vfma(ai, bv[v], acc[i][v]);
      }
    } else {
#if defined(__AVX512BF16__)
      __m512bh bv[NV];
      for (int v = 0; v < NV; ++v) {
        bv[v] = (__m512bh)((kPartial && v == NV - 1) ? _mm512_maskz_loadu_epi32(lanes(tail), b + v * W)
                                                     : _mm512_loadu_si512(b + v * W));
      }
      for (int i = 0; i < M; ++i) {
        const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i * o.ars]));
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
      }
#endif
    }
  }
  for (int i = 0; i < M; ++i) {
    for (int v = 0; v < NV; ++v) {
      float* c = o.c + i * o.ldc + v * W;
      if (kPartial && v == NV - 1) {
        store_n(c, acc[i][v], tail);
      } else {
        vstore(c, acc[i][v]);
      }
    }
  }
}

// Depth values per step of an operand type: 1 for floats, 2 for bf16 pairs.
template <class Ops>
constexpr int kDepthPerStep = 1;
#if defined(__AVX512BF16__)
template <>
constexpr int kDepthPerStep<PairOperands> = 2;
#endif

template <bool kAcc, int M, int NV, class Ops>
void tile_nv(int nv, int tail, int K, const Ops& o) {
  if constexpr (NV >= 1) {
    if (nv != NV) return tile_nv<kAcc, M, NV - 1>(nv, tail, K, o);
    if (tail == W) return micro_tile<M, NV, kAcc, false>(K, o, tail);
    return micro_tile<M, NV, kAcc, true>(K, o, tail);
  }
}

template <bool kAcc, int M, class Ops>
void tile_m(int m, int nv, int tail, int K, const Ops& o) {
  if constexpr (M >= 1) {
    if (m != M) return tile_m<kAcc, M - 1>(m, nv, tail, K, o);
    tile_nv<kAcc, M, kNV>(nv, tail, K, o);
  }
}

// Columns [n_lo, n_hi) and depth [k_lo, k_hi) a tile of rows needs: the causal mask makes the
// rest of A exactly zero (or of C unused), so skipping it changes no result.
struct Span {
  int n_lo, n_hi, k_lo, k_hi;
};

// C (+)= A B for M rows; span(i, m) gives the span of rows i .. i+m-1. Columns below n_lo are
// computed from the vector boundary below it (harmless: callers never read them when !kAcc, and
// kAcc callers use n_lo = 0). With bf16 pairs the depth span widens to whole pairs: the value it
// gains on either side is masked (exactly zero in A) or padding (zero in both operands).
template <bool kAcc, class Ops, class SpanOf>
void small_gemm(int M, const Ops& o, SpanOf span) {
  constexpr int S = kDepthPerStep<Ops>;
  for (int i = 0; i < M; i += kMR) {
    const int m = std::min(kMR, M - i);
    const Span s = span(i, m);
    if (s.k_hi <= s.k_lo || s.n_hi <= s.n_lo) continue;
    const int k_lo = s.k_lo / S, k_hi = (s.k_hi + S - 1) / S;
    for (int n = s.n_lo / W * W; n < s.n_hi; n += kNV * W) {
      const int rem = std::min(s.n_hi - n, kNV * W);
      const int nv = (rem + W - 1) / W;
      const Ops t{
          o.a + i * o.ars + k_lo * o.acs, o.ars, o.acs, o.b + k_lo * o.ldb + n, o.ldb, o.c + i * o.ldc + n, o.ldc};
      tile_m<kAcc, kMR>(m, nv, rem - (nv - 1) * W, k_hi - k_lo, t);
    }
  }
}

// A head's rows in the activations are thousands of bytes apart, each in another 4 KB page, where
// the hardware prefetchers (which stay within a page) do not follow: loops that walk them request
// the lines of the row kRowsAhead further on themselves.
constexpr int kRowsAhead = 8;
template <int kWrite = 0>
inline void prefetch_row(const float* row, int HS) {
  for (int d = 0; d < HS; d += 16) __builtin_prefetch(row + d, kWrite, 3);
  __builtin_prefetch(row + HS - 1, kWrite, 3);
}

// dst[d * ld + i] = scale * src[i * ld_src + d] for i < n, d < HS: a block of rows transposed, so
// that the rows' index becomes the contiguous (vector) one. With AVX2, 8 x 8 tiles through
// registers (a scalar transpose's strided stores would cost a quarter of the forward at T = 64).
void transpose_rows(float* dst, i64 ld, const float* src, i64 ld_src, int n, int HS, float scale) {
  int i0 = 0;
#if defined(__AVX2__)
  const __m256 sv = _mm256_set1_ps(scale);
  for (; i0 + 8 <= n; i0 += 8) {
    for (int i = i0 + kRowsAhead; i < std::min(n, i0 + kRowsAhead + 8); ++i) prefetch_row(src + i * ld_src, HS);
    int d0 = 0;
    for (; d0 + 8 <= HS; d0 += 8) {
      __m256 r[8], t[8], u[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + (i0 + i) * ld_src + d0);
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);      // a0 b0 a1 b1 | a4 b4 a5 b5
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // a2 b2 a3 b3 | a6 b6 a7 b7
      }
      for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));          // column 0 | 4
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));      // column 1 | 5
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));  // 2 | 6
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));  // 3 | 7
      }
      for (int d = 0; d < 4; ++d) {
        _mm256_storeu_ps(dst + (d0 + d) * ld + i0, _mm256_mul_ps(sv, _mm256_permute2f128_ps(u[d], u[d + 4], 0x20)));
        _mm256_storeu_ps(dst + (d0 + d + 4) * ld + i0, _mm256_mul_ps(sv, _mm256_permute2f128_ps(u[d], u[d + 4], 0x31)));
      }
    }
    for (int i = i0; i < i0 + 8; ++i) {
      for (int d = d0; d < HS; ++d) dst[d * ld + i] = scale * src[i * ld_src + d];
    }
  }
#endif
  for (int i = i0; i < n; ++i) {
    const float* s = src + i * ld_src;
    for (int d = 0; d < HS; ++d) dst[d * ld + i] = scale * s[d];
  }
}

// dst[i * HS + d] = src[i * ld_src + d] for i < n, d < HS: rows of one head copied to a dense
// block. A head's rows sit 3-9 KB apart in the activations (ld 768 or 2304 floats), so a B
// operand read in place puts every row's line of a 16-column micro-tile into the same 4 of L1's
// 64 sets, 12 lines to a set of 8 ways: the small GEMMs then read B from L2. Dense (256-byte
// rows), a block's lines spread over all sets.
//
// The copies pay once a head has more than two blocks, so that each copy is read by several
// block pairs; with one or two blocks they cost more than they save (docs/perf.md, "Attention").
bool copy_operands(int T) { return T > 2 * kBlock; }

void copy_rows(float* dst, const float* src, i64 ld_src, int n, int HS) {
  for (int i = 0; i < n; ++i, src += ld_src, dst += HS) {
    if (i + kRowsAhead < n) prefetch_row(src + kRowsAhead * ld_src, HS);
    int d = 0;
    for (; d + W <= HS; d += W) vstore(dst + d, vload(src + d));
    for (; d < HS; ++d) dst[d] = src[d];
  }
}

// Per-thread scratch, kept between calls. Every thread of the team sizes its own for the call's
// shape before taking tasks (scratch_floats, and scratch_pairs for bf16 products, cover forward
// and backward), so all allocation happens on the first call with a shape, however the dynamic
// schedule deals the tasks later.
// Arrays start on 64-byte boundaries: a std::vector's data is only 16-byte aligned (and lands
// 16 bytes past a page once it is large enough for malloc to map it), and a vector load at 16
// bytes past a line splits every other load across two lines.
struct Scratch {
  // kAlign more elements than the arrays need, for the alignment.
  std::vector<float> buf;
  std::vector<std::uint32_t> pairs;  // the bf16 products' operands (PairOperands)
  static constexpr std::size_t kAlign = 16;
  template <class E>
  E* take(std::size_t n, std::size_t& at) {
    static_assert(sizeof(E) == 4);
    std::vector<E>& v = storage(static_cast<E*>(nullptr));
    const std::size_t skip = (64 - reinterpret_cast<std::uintptr_t>(v.data()) % 64) % 64 / sizeof(E);
    E* p = v.data() + skip + at;
    at += (n + 15) / 16 * 16;  // whole lines keep the next array aligned too
    LLMCC_ASSERT(skip + at <= v.size(), "attention scratch smaller than scratch_floats or scratch_pairs promised");
    return p;
  }
  float* take(std::size_t n, std::size_t& at) { return take<float>(n, at); }
  std::uint32_t* take_pairs(std::size_t n, std::size_t& at) { return take<std::uint32_t>(n, at); }

 private:
  std::vector<float>& storage(float*) { return buf; }
  std::vector<std::uint32_t>& storage(std::uint32_t*) { return pairs; }
};
Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}
int padded_T(int T) { return (T + W - 1) / W * W; }
std::size_t scratch_floats(const AttentionLayout& L) {
  const std::size_t HS = L.HS, Tp = padded_T(L.T), Bk = kBlock;
  const std::size_t fwd = (3 * HS + Bk + 3) * Bk + 16 * 7;  // qt, st, m, l, corr, vblk, oacc (+ rounding)
  // qt, dot (rows Tp + 16 apart), qrows, dorows, D, Lh, pt, dst, dk, dv, kblk, vblk
  const std::size_t bwd = 2 * HS * (Tp + 16) + (2 * HS + 2) * Tp + 2 * Bk * (Bk + 2 * HS) + 16 * 12;
  return std::max(fwd, bwd);
}
// The bf16 products' pair arrays (forward_block and backward_head take them in this order).
std::size_t scratch_pairs(const AttentionLayout& L) {
  const std::size_t HS = L.HS, HP = (HS + 1) / 2, Tp = padded_T(L.T), Bk = kBlock;
  const std::size_t fwd = HP * Bk + Bk * HP + Bk / 2 * HS + Bk / 2 * Bk + HP + 16 * 5;  // qp, kp, vp, pp, row
  // qp, dop, qr, dor, kp, vp, kr, pp, dsp, dsr, row
  const std::size_t bwd = 2 * HP * (Tp + 16) + Tp * HS + 2 * Bk * HP + Bk / 2 * HS + 3 * Bk * Bk / 2 + HP + 16 * 11;
  return std::max(fwd, bwd);
}
void size_thread_scratch(const AttentionLayout& L, bool bf16) {
  Scratch& sc = thread_scratch();
  const std::size_t n = scratch_floats(L);
  if (sc.buf.size() < n + Scratch::kAlign) sc.buf.assign(n + Scratch::kAlign, 0.0f);
  const std::size_t np = bf16 ? scratch_pairs(L) : 0;
  if (np > 0 && sc.pairs.size() < np + Scratch::kAlign) sc.pairs.assign(np + Scratch::kAlign, 0u);
}

#if defined(__AVX512BF16__)
// out[p] = the pair (scale x[2p], scale x[2p + 1]) for p < (n + 1) / 2, the last high half zero
// when n is odd: a row's consecutive values as the pairs of an A operand (depth along the row).
void row_pairs(std::uint32_t* out, const float* x, int n, float scale) {
  const vec sv = vset1(scale);
  for (int d = 0; d < n; d += 2 * W) {
    const int m = std::min(2 * W, n - d);
    const vec lo = vmul(sv, load_n(x + d, std::min(W, m)));
    const vec hi = m > W ? vmul(sv, load_n(x + d + W, m - W)) : vzero();
    // vcvtne2ps2bf16 writes lo's 16 values to words 0-15 and hi's to 16-31: the row in order,
    // which as 32-bit words is its pairs in order.
    const __m512i w = std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    _mm512_mask_storeu_epi32(out + d / 2, lanes((m + 1) / 2), w);
  }
}

// dst[p * ld + i] = the pair (scale src[i][2p], scale src[i][2p + 1]) for rows i < n of src
// (row i at src + i * ld_src) and p < (HS + 1) / 2: rows transposed at pair granularity, the B
// operand of a product over the head dimension (S^T = K Q^T, dP^T = V dO^T). `row` holds one
// row's pairs on the way.
void transpose_row_pairs(std::uint32_t* dst, i64 ld, const float* src, i64 ld_src, int n, int HS, float scale,
                         std::uint32_t* row) {
  const int HP = (HS + 1) / 2;
  for (int i = 0; i < n; ++i) {
    if (i + kRowsAhead < n) prefetch_row(src + (i + kRowsAhead) * ld_src, HS);
    row_pairs(row, src + i * ld_src, HS, scale);
    for (int p = 0; p < HP; ++p) dst[p * ld + i] = row[p];
  }
}

// dst[p * ld + d] = the pair (src[2p][d], src[2p + 1][d]) for d < ncols and p < (n + 1) / 2 (row
// n zero when n is odd), row r of src at src + r * ld_src: two rows interleaved, the B operand of
// a product whose depth runs down the rows (O = P V, dV = P^T dO, dK = dS^T Q, dQ = dS K), or the A
// operand P or dS of one read across its rows.
void interleave_rows(std::uint32_t* dst, i64 ld, const float* src, i64 ld_src, int n, int ncols) {
  for (int r = 0; r < n; r += 2, dst += ld) {
    const float* x0 = src + r * ld_src;
    const float* x1 = x0 + ld_src;
    if (r + 1 + kRowsAhead < n) {
      prefetch_row(x0 + kRowsAhead * ld_src, ncols);
      prefetch_row(x1 + kRowsAhead * ld_src, ncols);
    }
    for (int d = 0; d < ncols; d += W) {
      const int m = std::min(W, ncols - d);
      const vec hi = r + 1 < n ? load_n(x1 + d, m) : vzero();
      _mm512_mask_storeu_epi32(dst + d, lanes(m), bf16_pairs(load_n(x0 + d, m), hi));
    }
  }
}
#endif

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---- forward ---------------------------------------------------------------------------------
// Query rows i0 .. i0+nq-1 of head h in batch b: S^T = K Q^T per key block, the online softmax
// vectorised across the block's queries, O += P V in scratch, then O / l into the output rows.
// kBf16: both products on bf16 pairs (scale Q^T, K and V converted per block, P after the
// softmax).
template <bool kBf16>
void forward_block(float* out, float* lse, const float* q, const float* k, const float* v, const AttentionLayout& L,
                   int b, int h, int i0) {
  const int T = L.T, HS = L.HS, nq = std::min(kBlock, T - i0);
  const int kvh = h / (L.NH / L.NKV);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const i64 row0 = i64{b} * T;
  const float* kb = k + row0 * L.ld_kv + i64{kvh} * HS;  // key j at kb + j * ld_kv
  const float* vb = v + row0 * L.ld_kv + i64{kvh} * HS;
  float* ob = out + (row0 + i0) * L.ld_out + i64{h} * HS;  // query i0 + ii at ob + ii * ld_out

  Scratch& sc = thread_scratch();
  std::size_t at = 0;
  float* qt = sc.take(std::size_t(HS) * kBlock, at);      // (HS, kBlock): scale * Q^T of the block
  float* st = sc.take(std::size_t(kBlock) * kBlock, at);  // (keys, kBlock): S^T, then P^T
  float* m = sc.take(kBlock, at);                         // running max per query
  float* l = sc.take(kBlock, at);                         // running sum of exp(s - m)
  float* corr = sc.take(kBlock, at);                      // exp(m_old - m_new)
  float* vblk = sc.take(std::size_t(kBlock) * HS, at);    // (keys, HS): V_blk, dense
  // (queries, HS): O, unnormalised. Accumulated here, dense, and written to the output rows once
  // at the end: those rows are ld_out apart (8 KB for a 2048-wide layer), and the product's C
  // tile of 8 of them would keep 16 lines in two L1 sets.
  float* oacc = sc.take(std::size_t(kBlock) * HS, at);
  // The bf16 products' operands (unused in fp32): HP pairs span the head dimension.
  [[maybe_unused]] const int HP = (HS + 1) / 2;
  [[maybe_unused]] std::size_t pat = 0;
  [[maybe_unused]] std::uint32_t* qp =
      kBf16 ? sc.take_pairs(std::size_t(HP) * kBlock, pat) : nullptr;  // (HP, kBlock): scale Q^T
  [[maybe_unused]] std::uint32_t* kp =
      kBf16 ? sc.take_pairs(std::size_t(kBlock) * HP, pat) : nullptr;  // (keys, HP): K_blk
  [[maybe_unused]] std::uint32_t* vp =
      kBf16 ? sc.take_pairs(std::size_t(kBlock) / 2 * HS, pat) : nullptr;  // (key pairs, HS): V_blk
  [[maybe_unused]] std::uint32_t* pp =
      kBf16 ? sc.take_pairs(std::size_t(kBlock) / 2 * kBlock, pat) : nullptr;      // (key pairs, kBlock): P^T
  [[maybe_unused]] std::uint32_t* row = kBf16 ? sc.take_pairs(HP, pat) : nullptr;  // (HP)

  const float* qrows = q + (row0 + i0) * L.ld_q + i64{h} * HS;
  if constexpr (kBf16) {
#if defined(__AVX512BF16__)
    transpose_row_pairs(qp, kBlock, qrows, L.ld_q, nq, HS, scale, row);
#endif
  } else {
    transpose_rows(qt, kBlock, qrows, L.ld_q, nq, HS, scale);
  }
  for (int ii = 0; ii < nq; ++ii) {
    m[ii] = kNegInf;
    l[ii] = 0.0f;
    std::fill_n(oacc + ii * HS, HS, 0.0f);
  }
  for (int j0 = 0; j0 < i0 + nq; j0 += kBlock) {
    const int nk = std::min(kBlock, i0 + nq - j0);  // keys no query of the block sees are skipped
    const int diag = i0 - j0;                       // key jj is visible to query ii iff jj <= ii + diag
    const bool full = nk - 1 <= diag;
    // S^T (nk, nq) = K_blk (nk, HS) . (scale Q^T) (HS, nq); a key tile needs queries >= its first key - diag.
    const auto queries_seen = [&](int jj, int) { return Span{full ? 0 : std::max(0, jj - diag), nq, 0, HS}; };
    if constexpr (kBf16) {
#if defined(__AVX512BF16__)
      for (int jj = 0; jj < nk; ++jj) row_pairs(kp + jj * HP, kb + i64{j0 + jj} * L.ld_kv, HS, 1.0f);
      small_gemm<false>(nk, PairOperands{kp, HP, 1, qp, kBlock, st, kBlock}, queries_seen);
#endif
    } else {
      small_gemm<false>(nk, Operands{kb + i64{j0} * L.ld_kv, L.ld_kv, 1, qt, kBlock, st, kBlock}, queries_seen);
    }
    // Online softmax, W queries at a time (lanes past nq compute on stale scratch and are never
    // read). Query ii sees keys jj <= ii + diag: in row jj of S^T, lanes below jj - diag are masked.
    for (int c = 0; c < nq; c += W) {
      vec mx = vload(m + c);
      for (int jj = 0; jj < nk; ++jj) {
        const int hidden = full ? 0 : std::min(W, jj - diag - c);  // masked lanes of this row
        if (hidden >= W) break;                                    // so are all later rows' lanes
        const vec sv = vload(st + jj * kBlock + c);
        mx = vmax(mx, hidden > 0 ? fill_below(sv, hidden, vset1(kNegInf)) : sv);
      }
      const vec cr = vexp(vsub(vload(m + c), mx));  // ~1e-38 on the first block (m = -inf, l = 0)
      vstore(corr + c, cr);
      vstore(m + c, mx);
      vec sum = vmul(vload(l + c), cr);
      for (int jj = 0; jj < nk; ++jj) {
        float* sp = st + jj * kBlock + c;
        const int hidden = full ? 0 : std::min(W, std::max(0, jj - diag - c));
        vec pv = hidden < W ? vexp(vsub(vload(sp), mx)) : vzero();
        if (hidden > 0) pv = fill_below(pv, hidden, vzero());
        vstore(sp, pv);
        sum = vadd(sum, pv);
      }
      vstore(l + c, sum);
    }
    if (j0 > 0) {
      for (int ii = 0; ii < nq; ++ii) {
        float* o = oacc + ii * HS;
        const float c = corr[ii];
#pragma omp simd
        for (int d = 0; d < HS; ++d) o[d] *= c;
      }
    }
    // O (nq, HS) += P (nq, nk) . V_blk (nk, HS); P = (P^T)^T read with swapped strides. A query
    // tile needs keys <= its last query + diag.
    const auto keys_seen = [&](int ii, int rows) { return Span{0, HS, 0, full ? nk : std::min(nk, ii + rows + diag)}; };
    const float* v_blk = vb + i64{j0} * L.ld_kv;
    if constexpr (kBf16) {
#if defined(__AVX512BF16__)
      interleave_rows(pp, kBlock, st, kBlock, nk, nq);
      interleave_rows(vp, HS, v_blk, L.ld_kv, nk, HS);
      small_gemm<true>(nq, PairOperands{pp, 1, kBlock, vp, HS, oacc, HS}, keys_seen);
#endif
    } else {
      i64 ld_v_blk = L.ld_kv;
      if (copy_operands(T)) {
        copy_rows(vblk, v_blk, L.ld_kv, nk, HS);
        v_blk = vblk, ld_v_blk = HS;
      }
      small_gemm<true>(nq, Operands{st, 1, kBlock, v_blk, ld_v_blk, oacc, HS}, keys_seen);
    }
  }
  for (int ii = 0; ii < nq; ++ii) {
    float* o = ob + ii * L.ld_out;
    const float* a = oacc + ii * HS;
    const float inv = 1.0f / l[ii];
#pragma omp simd
    for (int d = 0; d < HS; ++d) o[d] = a[d] * inv;
    if (lse) lse[(i64{b} * L.NH + h) * T + i0 + ii] = m[ii] + std::log(l[ii]);
  }
}

// ---- backward --------------------------------------------------------------------------------
// Head h of batch b, accumulating into its own dQ and, for its kv head, into dK and dV: key j's
// rows at dk_rows + j * ld_dkv and dv_rows + j * ld_dkv (null: not wanted), or written there
// instead when assign_kv. Key blocks outermost: a block's dK and dV stay in scratch while every
// query block that sees it passes, then go to their rows once.
// kBf16: all five products on bf16 pairs (Q, dO and K, V converted once per head or key block, P
// and dS per block pair); the softmax, D and the sums stay fp32.
template <bool kBf16>
void backward_head(float* d_q, float* dk_rows, float* dv_rows, i64 ld_dkv, bool assign_kv, const float* d_out,
                   const float* q, const float* k, const float* v, const float* out, const float* lse,
                   const AttentionLayout& L, int b, int h) {
  const int T = L.T, HS = L.HS;
  const int kvh = h / (L.NH / L.NKV);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const i64 row0 = i64{b} * T;
  const i64 qcol = i64{h} * HS, kvcol = i64{kvh} * HS;
  const float* qb = q + row0 * L.ld_q + qcol;  // query i at qb + i * ld_q
  const float* kb = k + row0 * L.ld_kv + kvcol;
  const float* vb = v + row0 * L.ld_kv + kvcol;
  const float* ob = out + row0 * L.ld_out + qcol;
  const float* dob = d_out + row0 * L.ld_out + qcol;
  float* dqb = d_q ? d_q + row0 * L.ld_q + qcol : nullptr;
  const float* lse_h = lse + (i64{b} * L.NH + h) * T;  // (T)
  const bool need_ds = d_q || dk_rows;

  Scratch& sc = thread_scratch();
  std::size_t at = 0;
  const int Tp = padded_T(T);
  // The transposes' rows are ldt apart, not Tp: at Tp = 1024 their stores down a column (one per
  // row of the result) would all fall into one L1 set and evict each other.
  const int ldt = Tp + 16;
  float* qt = sc.take(std::size_t(HS) * ldt, at);          // (HS, ldt): scale * Q^T of the head
  float* dot = sc.take(std::size_t(HS) * ldt, at);         // (HS, ldt): dO^T
  float* D = sc.take(Tp, at);                              // (T): dO_i . O_i
  float* Lh = sc.take(Tp, at);                             // (T): lse of the head
  float* pt = sc.take(std::size_t(kBlock) * kBlock, at);   // (keys, queries): P^T
  float* dst = sc.take(std::size_t(kBlock) * kBlock, at);  // (keys, queries): dP^T, then scale dS^T
  float* dk_acc = sc.take(std::size_t(kBlock) * HS, at);   // (keys, HS)
  float* dv_acc = sc.take(std::size_t(kBlock) * HS, at);   // (keys, HS)
  float* qrows = sc.take(std::size_t(HS) * Tp, at);        // (T, HS): Q of the head, dense
  float* dorows = sc.take(std::size_t(HS) * Tp, at);       // (T, HS): dO of the head, dense
  float* kblk = sc.take(std::size_t(kBlock) * HS, at);     // (keys, HS): K_blk, dense
  float* vblk = sc.take(std::size_t(kBlock) * HS, at);     // (keys, HS): V_blk, dense
  // The bf16 products' operands (unused in fp32): HP pairs span the head dimension, Tp / 2 the
  // head's queries, kBlock / 2 a block's keys or queries.
  [[maybe_unused]] const int HP = (HS + 1) / 2;
  [[maybe_unused]] const std::size_t Bk = kBlock;
  [[maybe_unused]] std::size_t pat = 0;
  [[maybe_unused]] std::uint32_t* qp =
      kBf16 ? sc.take_pairs(std::size_t(HP) * ldt, pat) : nullptr;  // (HP, ldt): scale Q^T
  [[maybe_unused]] std::uint32_t* dop = kBf16 ? sc.take_pairs(std::size_t(HP) * ldt, pat) : nullptr;  // (HP, ldt): dO^T
  [[maybe_unused]] std::uint32_t* qr =
      kBf16 ? sc.take_pairs(std::size_t(Tp) / 2 * HS, pat) : nullptr;  // (query pairs, HS): Q
  [[maybe_unused]] std::uint32_t* dor =
      kBf16 ? sc.take_pairs(std::size_t(Tp) / 2 * HS, pat) : nullptr;                       // (query pairs, HS): dO
  [[maybe_unused]] std::uint32_t* kp = kBf16 ? sc.take_pairs(Bk * HP, pat) : nullptr;       // (keys, HP): K_blk
  [[maybe_unused]] std::uint32_t* vp = kBf16 ? sc.take_pairs(Bk * HP, pat) : nullptr;       // (keys, HP): V_blk
  [[maybe_unused]] std::uint32_t* kr = kBf16 ? sc.take_pairs(Bk / 2 * HS, pat) : nullptr;   // (key pairs, HS): K_blk
  [[maybe_unused]] std::uint32_t* pp = kBf16 ? sc.take_pairs(Bk * Bk / 2, pat) : nullptr;   // (keys, query pairs): P^T
  [[maybe_unused]] std::uint32_t* dsp = kBf16 ? sc.take_pairs(Bk * Bk / 2, pat) : nullptr;  // (keys, query pairs): dS^T
  [[maybe_unused]] std::uint32_t* dsr =
      kBf16 ? sc.take_pairs(Bk / 2 * Bk, pat) : nullptr;                           // (key pairs, queries): dS^T
  [[maybe_unused]] std::uint32_t* row = kBf16 ? sc.take_pairs(HP, pat) : nullptr;  // (HP)

  if constexpr (kBf16) {
#if defined(__AVX512BF16__)
    transpose_row_pairs(qp, ldt, qb, L.ld_q, T, HS, scale, row);
    if (need_ds) transpose_row_pairs(dop, ldt, dob, L.ld_out, T, HS, 1.0f, row);
    if (dk_rows) interleave_rows(qr, HS, qb, L.ld_q, T, HS);
    if (dv_rows) interleave_rows(dor, HS, dob, L.ld_out, T, HS);
#endif
  } else {
    transpose_rows(qt, ldt, qb, L.ld_q, T, HS, scale);
    if (need_ds) transpose_rows(dot, ldt, dob, L.ld_out, T, HS, 1.0f);
  }
  // Q and dO rows as the fp32 B operands of dK and dV: in place, or copied dense.
  const bool copy = !kBf16 && copy_operands(T);
  const float* q_rows = qb;
  const float* do_rows = dob;
  i64 ld_q_rows = L.ld_q, ld_do_rows = L.ld_out;
  if (copy && dk_rows) {
    copy_rows(qrows, qb, L.ld_q, T, HS);
    q_rows = qrows, ld_q_rows = HS;
  }
  if (copy && dv_rows) {
    copy_rows(dorows, dob, L.ld_out, T, HS);
    do_rows = dorows, ld_do_rows = HS;
  }
  for (int i = 0; i < T; ++i) {
    const float* o = ob + i * L.ld_out;
    const float* g = dob + i * L.ld_out;
    if (i + kRowsAhead < T) {
      prefetch_row(o + kRowsAhead * L.ld_out, HS);
      prefetch_row(g + kRowsAhead * L.ld_out, HS);
    }
    D[i] = ordered_sum(HS, [&](std::int64_t d) { return g[d] * o[d]; });
    Lh[i] = lse_h[i];
  }

  for (int j0 = 0; j0 < T; j0 += kBlock) {
    const int nk = std::min(kBlock, T - j0);
    std::fill_n(dk_acc, std::size_t(nk) * HS, 0.0f);
    std::fill_n(dv_acc, std::size_t(nk) * HS, 0.0f);
    // The key block's K and V rows, in place or copied dense.
    const float* k_blk = kb + i64{j0} * L.ld_kv;
    const float* v_blk = vb + i64{j0} * L.ld_kv;
    i64 ld_k_blk = L.ld_kv, ld_v_blk = L.ld_kv;
    if (copy) {
      copy_rows(kblk, k_blk, L.ld_kv, nk, HS);
      k_blk = kblk, ld_k_blk = HS;
      if (need_ds) {  // V is read only by dP^T
        copy_rows(vblk, v_blk, L.ld_kv, nk, HS);
        v_blk = vblk, ld_v_blk = HS;
      }
    }
    if constexpr (kBf16) {
#if defined(__AVX512BF16__)
      for (int jj = 0; jj < nk; ++jj) row_pairs(kp + jj * HP, k_blk + jj * ld_k_blk, HS, 1.0f);
      if (need_ds) {
        for (int jj = 0; jj < nk; ++jj) row_pairs(vp + jj * HP, v_blk + jj * ld_v_blk, HS, 1.0f);
      }
      if (d_q) interleave_rows(kr, HS, k_blk, ld_k_blk, nk, HS);
#endif
    }
    for (int i0 = j0 / kBlock * kBlock; i0 < T; i0 += kBlock) {
      const int nq = std::min(kBlock, T - i0);
      const int diag = i0 - j0;  // key jj is visible to query ii iff jj <= ii + diag
      const bool full = nk - 1 <= diag;
      auto keys_by_queries = [&](int jj, int) {  // rows: keys; columns or depth: queries
        return Span{full ? 0 : std::max(0, jj - diag), nq, full ? 0 : std::max(0, jj - diag), nq};
      };
      auto queries_over_heads = [&](int jj, int r) {  // rows: keys; columns: queries; depth: HS
        Span s = keys_by_queries(jj, r);
        return Span{s.n_lo, nq, 0, HS};
      };
      // S^T (nk, nq) = K_blk . (scale Q^T); P^T = exp(S^T - lse), 0 where masked.
      if constexpr (kBf16) {
#if defined(__AVX512BF16__)
        small_gemm<false>(nk, PairOperands{kp, HP, 1, qp + i0, ldt, pt, kBlock}, queries_over_heads);
#endif
      } else {
        small_gemm<false>(nk, Operands{k_blk, ld_k_blk, 1, qt + i0, ldt, pt, kBlock}, queries_over_heads);
      }
      // P^T = exp(S^T - lse), W queries at a time, 0 where masked (select, not multiply: masked
      // entries of the scratch hold stale values; lanes past nq are never read).
      for (int c = 0; c < nq; c += W) {
        const vec lv = vload(Lh + i0 + c);
        for (int jj = 0; jj < nk; ++jj) {
          const int hidden = full ? 0 : std::min(W, std::max(0, jj - diag - c));
          float* p = pt + jj * kBlock + c;
          vec pv = hidden < W ? vexp(vsub(vload(p), lv)) : vzero();
          if (hidden > 0) pv = fill_below(pv, hidden, vzero());
          vstore(p, pv);
        }
      }
      if (need_ds) {
        // dP^T (nk, nq) = V_blk . dO^T; dS^T = scale * P^T * (dP^T - D), 0 where masked.
        if constexpr (kBf16) {
#if defined(__AVX512BF16__)
          small_gemm<false>(nk, PairOperands{vp, HP, 1, dop + i0, ldt, dst, kBlock}, queries_over_heads);
#endif
        } else {
          small_gemm<false>(nk, Operands{v_blk, ld_v_blk, 1, dot + i0, ldt, dst, kBlock}, queries_over_heads);
        }
        const vec sv = vset1(scale);
        for (int c = 0; c < nq; c += W) {
          const vec dv = vload(D + i0 + c);
          for (int jj = 0; jj < nk; ++jj) {
            const int hidden = full ? 0 : std::min(W, std::max(0, jj - diag - c));
            float* ds = dst + jj * kBlock + c;
            vec g = hidden < W ? vmul(vmul(sv, vload(pt + jj * kBlock + c)), vsub(vload(ds), dv)) : vzero();
            if (hidden > 0) g = fill_below(g, hidden, vzero());
            vstore(ds, g);
          }
        }
      }
      // dV_blk (nk, HS) += P^T (nk, nq) . dO_blk (nq, HS); dK_blk += dS^T . Q_blk. A key tile
      // needs queries >= its first key - diag.
      auto depth_queries = [&](int jj, int r) {
        Span s = keys_by_queries(jj, r);
        return Span{0, HS, s.k_lo, nq};
      };
      // dQ_blk (nq, HS) += dS (nq, nk) . K_blk (nk, HS). A query tile needs keys <= its last query + diag.
      auto keys_seen = [&](int ii, int rows) { return Span{0, HS, 0, full ? nk : std::min(nk, ii + rows + diag)}; };
      if constexpr (kBf16) {
#if defined(__AVX512BF16__)
        // Query i0 is even (a multiple of kBlock), so the block's query pairs start at pair i0 / 2.
        const i64 qpair0 = i0 / 2;
        if (dv_rows) {
          for (int jj = 0; jj < nk; ++jj) row_pairs(pp + jj * (Bk / 2), pt + jj * kBlock, nq, 1.0f);
          small_gemm<true>(nk, PairOperands{pp, Bk / 2, 1, dor + qpair0 * HS, HS, dv_acc, HS}, depth_queries);
        }
        if (dk_rows) {
          for (int jj = 0; jj < nk; ++jj) row_pairs(dsp + jj * (Bk / 2), dst + jj * kBlock, nq, 1.0f);
          small_gemm<true>(nk, PairOperands{dsp, Bk / 2, 1, qr + qpair0 * HS, HS, dk_acc, HS}, depth_queries);
        }
        if (d_q) {
          interleave_rows(dsr, kBlock, dst, kBlock, nk, nq);
          small_gemm<true>(nq, PairOperands{dsr, 1, kBlock, kr, HS, dqb + i64{i0} * L.ld_q, L.ld_q}, keys_seen);
        }
#endif
      } else {
        if (dv_rows) {
          small_gemm<true>(nk, Operands{pt, kBlock, 1, do_rows + i0 * ld_do_rows, ld_do_rows, dv_acc, HS},
                           depth_queries);
        }
        if (dk_rows) {
          small_gemm<true>(nk, Operands{dst, kBlock, 1, q_rows + i0 * ld_q_rows, ld_q_rows, dk_acc, HS}, depth_queries);
        }
        if (d_q)
          small_gemm<true>(nq, Operands{dst, 1, kBlock, k_blk, ld_k_blk, dqb + i64{i0} * L.ld_q, L.ld_q}, keys_seen);
      }
    }
    // Added after the block, not accumulated in place: dK and dV may alias dQ (or each other).
    for (int jj = 0; jj < nk; ++jj) {
      const i64 row = i64{j0 + jj} * ld_dkv;
      if (jj + kRowsAhead < nk) {
        const i64 ahead = row + kRowsAhead * ld_dkv;
        if (dk_rows) prefetch_row<1>(dk_rows + ahead, HS);
        if (dv_rows) prefetch_row<1>(dv_rows + ahead, HS);
      }
      if (dk_rows) {
        float* dk = dk_rows + row;
        const float* a = dk_acc + i64{jj} * HS;
        if (assign_kv) {
          std::copy_n(a, HS, dk);
        } else {
#pragma omp simd
          for (int d = 0; d < HS; ++d) dk[d] += a[d];
        }
      }
      if (dv_rows) {
        float* dv = dv_rows + row;
        const float* a = dv_acc + i64{jj} * HS;
        if (assign_kv) {
          std::copy_n(a, HS, dv);
        } else {
#pragma omp simd
          for (int d = 0; d < HS; ++d) dv[d] += a[d];
        }
      }
    }
  }
}

}  // namespace

bool runs_bf16(AttentionProducts products) { return kHaveBf16DotProduct && products == AttentionProducts::Bf16; }

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, const AttentionLayout& L,
                       AttentionProducts products) {
  const bool bf16 = runs_bf16(products);
  const i64 blocks = (L.T + kBlock - 1) / kBlock;
  const i64 tasks = i64{L.B} * L.NH * blocks;
  // Query blocks differ in cost (block i sees i + 1 key blocks), hence dynamic; the last blocks
  // of a head go first so that the expensive ones do not end up alone at the tail.
  const auto task = [&](i64 t) {
    const i64 bh = t / blocks;
    const int blk = static_cast<int>(blocks - 1 - t % blocks);
    const int b = static_cast<int>(bh / L.NH), h = static_cast<int>(bh % L.NH);
    if constexpr (kHaveBf16DotProduct) {
      if (bf16) return forward_block<kHaveBf16DotProduct>(out, lse, q, k, v, L, b, h, blk * kBlock);
    }
    forward_block<false>(out, lse, q, k, v, L, b, h, blk * kBlock);
  };
  // One thread (or already inside a region): no region at all, since libgomp allocates a
  // one-thread team for every region it opens (src/kernels/cpu/parallel.h).
  if (!use_team(tasks > 1)) {
    size_thread_scratch(L, bf16);
    for (i64 t = 0; t < tasks; ++t) task(t);
    return;
  }
#pragma omp parallel
  {
    size_thread_scratch(L, bf16);
#pragma omp for schedule(dynamic, 1)
    for (i64 t = 0; t < tasks; ++t) task(t);
  }
}

void attention_backward(float* d_q, float* d_k, float* d_v, const float* d_out, const float* q, const float* k,
                        const float* v, const float* out, const float* lse, const AttentionLayout& L, bool overwrite_q,
                        bool overwrite_k, bool overwrite_v, AttentionProducts products) {
  if (!d_q && !d_k && !d_v) return;
  const bool bf16 = runs_bf16(products);
  const int group = L.NH / L.NKV;
  // T rows of `width` floats from column `col` of batch b's rows (stride ld) set to zero.
  const auto zero_rows = [&](float* d, i64 ld, int b, i64 col, int width) {
    for (int t = 0; t < L.T; ++t) std::fill_n(d + (i64{b} * L.T + t) * ld + col, width, 0.0f);
  };
  const auto head = [&](int b, int h, float* dk_rows, float* dv_rows, i64 ld_dkv, bool assign_kv) {
    if constexpr (kHaveBf16DotProduct) {
      if (bf16) {
        return backward_head<kHaveBf16DotProduct>(d_q, dk_rows, dv_rows, ld_dkv, assign_kv, d_out, q, k, v, out, lse, L,
                                                  b, h);
      }
    }
    backward_head<false>(d_q, dk_rows, dv_rows, ld_dkv, assign_kv, d_out, q, k, v, out, lse, L, b, h);
  };
  // Batch b's rows of kv head kvh in d (null stays null).
  const auto kv_rows = [&](float* d, int b, int kvh) {
    return d ? d + i64{b} * L.T * L.ld_kv + i64{kvh} * L.HS : nullptr;
  };
  // Batch b's dK, dV rows of kv head kvh set to zero where their overwrite flags ask for it.
  const auto zero_kv = [&](int b, int kvh) {
    if (d_k && overwrite_k) zero_rows(d_k, L.ld_kv, b, i64{kvh} * L.HS, L.HS);
    if (d_v && overwrite_v) zero_rows(d_v, L.ld_kv, b, i64{kvh} * L.HS, L.HS);
  };

  // One task per (b, kv head) owns that kv head's dK, dV rows and its query heads' dQ rows, so
  // nothing is shared. When those tasks are too few to share evenly (5 kv heads on 2 threads
  // take 3 task times against 2.5), the tasks are per query head instead: the first head of each
  // group adds into dK and dV, the others write partial (T, HS) rows, and after a barrier the
  // partials are added in head order, the order one task would have added them in (the same
  // bits).
  const int threads = use_team(true) ? std::min(omp_get_max_threads(), omp_get_thread_limit()) : 1;
  const i64 kv_tasks = i64{L.B} * L.NKV, head_tasks = i64{L.B} * L.NH;
  const bool split =
      group > 1 && (d_k || d_v) && (kv_tasks + threads - 1) / threads * group > (head_tasks + threads - 1) / threads;
  if (!split) {
    const auto task = [&](int b, int kvh) {
      if (d_q && overwrite_q) zero_rows(d_q, L.ld_q, b, i64{kvh} * group * L.HS, group * L.HS);
      zero_kv(b, kvh);
      for (int h = kvh * group; h < (kvh + 1) * group; ++h)
        head(b, h, kv_rows(d_k, b, kvh), kv_rows(d_v, b, kvh), L.ld_kv, false);
    };
    if (!use_team(kv_tasks > 1)) {  // see attention_forward
      size_thread_scratch(L, bf16);
      for (int b = 0; b < L.B; ++b)
        for (int kvh = 0; kvh < L.NKV; ++kvh) task(b, kvh);
      return;
    }
#pragma omp parallel
    {
      size_thread_scratch(L, bf16);
#pragma omp for collapse(2) schedule(dynamic, 1)
      for (int b = 0; b < L.B; ++b) {
        for (int kvh = 0; kvh < L.NKV; ++kvh) task(b, kvh);
      }
    }
    return;
  }

  // Partial rows: (B, NKV, group - 1) blocks of dK then dV, (T, HS) each; the calling thread's,
  // kept between calls.
  const std::size_t rows_floats = std::size_t(L.T) * L.HS;
  thread_local std::vector<float> partial;
  const std::size_t partial_floats = std::size_t(kv_tasks) * (group - 1) * 2 * rows_floats;
  if (partial.size() < partial_floats) partial.assign(partial_floats, 0.0f);
  // The team's threads use the calling thread's buffer (the name `partial` would be their own).
  float* const part = partial.data();
  const auto partial_rows = [&](int b, int h, int which) {  // which: 0 dK, 1 dV
    const int kvh = h / group, g = h % group;
    return part + ((i64{b} * L.NKV + kvh) * (group - 1) + (g - 1)) * 2 * rows_floats + which * rows_floats;
  };
  const auto head_task = [&](i64 t) {
    const int b = static_cast<int>(t / L.NH), h = static_cast<int>(t % L.NH), kvh = h / group;
    if (d_q && overwrite_q) zero_rows(d_q, L.ld_q, b, i64{h} * L.HS, L.HS);
    if (h % group == 0) {
      zero_kv(b, kvh);
      head(b, h, kv_rows(d_k, b, kvh), kv_rows(d_v, b, kvh), L.ld_kv, false);
    } else {
      head(b, h, d_k ? partial_rows(b, h, 0) : nullptr, d_v ? partial_rows(b, h, 1) : nullptr, L.HS, true);
    }
  };
  // Row t of batch b's kv head kvh: += the partials of query heads 1 .. group-1, in order.
  const auto add_partials = [&](i64 r) {
    const int b = static_cast<int>(r / (i64{L.NKV} * L.T)), kvh = static_cast<int>(r / L.T % L.NKV);
    const int t = static_cast<int>(r % L.T);
    for (int which = 0; which < 2; ++which) {
      float* d = kv_rows(which == 0 ? d_k : d_v, b, kvh);
      if (!d) continue;
      float* row = d + i64{t} * L.ld_kv;
      for (int g = 1; g < group; ++g) {
        const float* p = partial_rows(b, kvh * group + g, which) + i64{t} * L.HS;
#pragma omp simd
        for (int c = 0; c < L.HS; ++c) row[c] += p[c];
      }
    }
  };
#pragma omp parallel
  {
    size_thread_scratch(L, bf16);
#pragma omp for schedule(dynamic, 1)
    for (i64 t = 0; t < head_tasks; ++t) head_task(t);
#pragma omp for schedule(static)
    for (i64 r = 0; r < kv_tasks * L.T; ++r) add_partials(r);
  }
}

}  // namespace llmcc::cpu
