// The register-blocked micro-kernel of cpu::gemm_packed (gemm_packed.cpp) and the block sizes
// that go with it, one set per instruction set, chosen at compile time:
//   AVX-512 (__AVX512F__):     14 x 32 tile, 28 zmm accumulators   (measured on Zen 4)
//   AVX2 + FMA (__AVX2__):      6 x 16 tile, 12 ymm accumulators   (measured on Zen 3)
//   portable (neither):         4 x  8 tile of plain floats that the compiler vectorises
//
// The micro-kernel computes one MR x NR tile of C from a packed panel of A (k steps of MR
// values: column p of op(A)'s MR rows) and a packed panel of B (k steps of NR values: row p of
// op(B)'s NR columns), both padded with zeros to full MR / NR:
//   C(MR, NR) = alpha * Apanel(MR, k) . Bpanel(k, NR) + beta * C (+ bias, one per column)
// With beta == 0, C is not read (it may hold NaN), as in BLAS. A bias (NR values, or null) is
// added in the same store, so a GEMM's last K slice can add it while the tile is in registers.
//
// The k step is a policy (Fp32Step, Bf16PairStep): the bf16 GEMM's panels hold pairs of bf16
// (two consecutive k in 32 bits) and each of its steps is one vdpbf16ps, which adds both
// products of a pair into an fp32 lane. The tile, its accumulators and its store are the same.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace llmcc::cpu::packed {

#if defined(__AVX512F__)
struct Isa {
  static constexpr const char* kName = "avx512 14x32";
  using V = __m512;
  static constexpr int kWidth = 16;  // floats per vector
  static constexpr int kMR = 14;     // rows of the C tile
  static constexpr int kNV = 2;      // vectors per row of the C tile
  // Cache blocks: an MC x KC block of A in L2 (336 KB; every AVX-512 CPU has 1 MB or more), a
  // KC x NC block of B in L3 (6 MB). The KC x NR panel of B (48 KB) is larger than a 32 KB L1
  // and streams from L2, which a 28-FMA k step of 128 + 56 bytes does not strain. KC 384
  // rather than the 224 that would keep the panel in L1: C is read and written K / KC times,
  // and at K = 768 that is 2 passes instead of 4. The choice and its measurement on Zen 4:
  // docs/perf.md, "GEMM blocking and micro-kernels".
  static constexpr int kKC = 384, kMC = 224, kNC = 4096;
  // The streaming order's packed op(A) slice (gemm_packed.cpp), three quarters of a 1 MB L2:
  // 256 rows (19 tiles of 14) at KC 384, so K = 768 goes in 2 slices (with 258 x 256 floats: 4
  // of 192), and 512 rows (37 tiles) at 378, so the products of B*T = 512 tokens are sliced
  // nearly as deep as the blocked order's (a slice of 256 rows' size would cut them to 196).
  // Measured: docs/perf.md, "GEMM blocking and micro-kernels".
  static constexpr int kStreamA = 196608;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct Isa {
  static constexpr const char* kName = "avx2 6x16";
  using V = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kMR = 6;
  static constexpr int kNV = 2;
  // A KC x NR panel of B in L1 (24 KB of 32), an MC x KC block of A in L2 (360 KB of 512 on
  // one thread; 2 threads take 132-row blocks at M = 1,024: 198 KB), a KC x NC block of B in L3
  // (6 MB). MC 240 rather than 144: each op(B) panel in L1 serves 40 row tiles instead of 24.
  // KC 384 rather than 256: C is read and written K / KC times (K = 768: 2 passes, not 3).
  // Measured on Zen 3: docs/perf.md, "GEMM blocking and micro-kernels" (MC: docs/perf-log.md).
  static constexpr int kKC = 384, kMC = 240, kNC = 4096;
  // The streaming order's op(A) slice: see kStreamA in gemm_packed.cpp (Zen 3's L2 is 512 KB).
  static constexpr int kStreamA = 258 * 256;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
};
#else
struct Isa {
  static constexpr const char* kName = "portable 4x8";
  struct V {
    float x[4];
  };
  static constexpr int kWidth = 4;
  static constexpr int kMR = 4;
  static constexpr int kNV = 2;
  static constexpr int kKC = 256, kMC = 128, kNC = 2048;
  static constexpr int kStreamA = 256 * 256;
  static V zero() { return V{{0.0f, 0.0f, 0.0f, 0.0f}}; }
  static V set1(float s) { return V{{s, s, s, s}}; }
  static V load(const float* p) { return V{{p[0], p[1], p[2], p[3]}}; }
  static void store(float* p, V v) {
    for (int i = 0; i < 4; ++i) p[i] = v.x[i];
  }
  static V fma(V a, V b, V c) {
    for (int i = 0; i < 4; ++i) c.x[i] += a.x[i] * b.x[i];
    return c;
  }
  static V mul(V a, V b) {
    for (int i = 0; i < 4; ++i) a.x[i] *= b.x[i];
    return a;
  }
};
#endif

constexpr int kMR = Isa::kMR;
constexpr int kNR = Isa::kNV * Isa::kWidth;
static_assert(Isa::kMC % kMR == 0 && Isa::kNC % kNR == 0, "cache blocks must hold whole tiles");

// One k step of fp32 panels: acc += a(:, p) . b(p, :), a holding kMR values and b kNR.
struct Fp32Step {
  using Elem = float;
  template <int MR, int NV>
  __attribute__((always_inline)) static void step(Isa::V (&acc)[MR][NV], const float* a, const float* b) {
    constexpr int W = Isa::kWidth;
    Isa::V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = Isa::load(b + v * W);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      const Isa::V av = Isa::set1(a[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = Isa::fma(av, bv[v], acc[r][v]);
    }
  }
};

#if defined(__AVX512BF16__)
// One step of bf16 pair panels, two steps of k: a holds kMR pairs (row r's values at k = 2p
// and 2p + 1, the even one in the low half), b kNR pairs (column j's at the same two k). A
// row's pair is broadcast to every lane, and vdpbf16ps adds a(r, 2p) b(2p, j) + a(r, 2p + 1)
// b(2p + 1, j) to lane j in fp32.
struct Bf16PairStep {
  using Elem = std::uint32_t;
  template <int MR, int NV>
  __attribute__((always_inline)) static void step(Isa::V (&acc)[MR][NV], const std::uint32_t* a,
                                                  const std::uint32_t* b) {
    constexpr int W = Isa::kWidth;
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + v * W);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
};
#endif

// One tile of Rows x (Vectors * kWidth) (Rows = MR: a full tile; fewer: the last rows of a
// product whose row count is not a multiple of MR, e.g. the 4 left over from 256 = 42 x 6 + 4;
// Vectors = kNV: a full tile; fewer: the first columns of the panel, for a product narrower than
// NR, such as a LoRA adapter's rank-16 products): k Steps over the packed panels a (k, MR; rows
// past Rows are padding and not read) and b (k, NR; columns past Vectors * kWidth are not read),
// then c (Rows rows, stride ldc) = alpha * acc + beta * c. Every loop has constant bounds and is
// unrolled, so the accumulators live in registers.
template <class Step, int Rows = kMR, int Vectors = Isa::kNV>
inline void microkernel(int k, const typename Step::Elem* __restrict a, const typename Step::Elem* __restrict b,
                        float* c, std::ptrdiff_t ldc, float alpha, float beta, const float* bias = nullptr) {
  static_assert(Rows >= 1 && Rows <= kMR, "a tile has 1 to MR rows");
  static_assert(Vectors >= 1 && Vectors <= Isa::kNV, "a tile has 1 to kNV vectors per row");
  using V = Isa::V;
  constexpr int MR = Rows, NV = Vectors, W = Isa::kWidth;
  V acc[MR][NV];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = Isa::zero();

  // One step of the k loop, then a and b move to the next step. Always inlined: called out of
  // line (Clang does, under -fsanitize=address), it would keep acc in memory and make every
  // FMA a load and a store.
  auto step = [&]() __attribute__((always_inline)) {
    Step::template step<MR, NV>(acc, a, b);
    a += kMR;
    b += kNR;
  };
  // The C tile is read only after the k loop, too late for out-of-order execution to hide a
  // cache miss (C is usually larger than L2), so its rows are requested halfway through. Not at
  // the start: when ldc is a multiple of 1024 floats (GPT-2's 3072-wide activations), all MR
  // rows fall in one L1 set, and held there for the whole loop they evict the B panel's lines
  // of that set. A quarter or three quarters of the way does as well as halfway (docs/perf.md,
  // "GEMM blocking and micro-kernels"; docs/perf-log.md).
  const int k_half = k / 2;
#pragma GCC unroll 2
  for (int p = 0; p < k_half; ++p) step();
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r) {
    __builtin_prefetch(c + r * ldc, 1, 3);
    __builtin_prefetch(c + r * ldc + NV * W - 1, 1, 3);
  }
#pragma GCC unroll 2
  for (int p = k_half; p < k; ++p) step();

  // C = alpha * acc + rest(the C vector's address, its column vector v): one store loop for the
  // cases below. beta == 0 without a bias reads nothing and multiplies, as in BLAS.
  const V va = Isa::set1(alpha), vb = Isa::set1(beta);
  auto store = [&](auto rest) {
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        float* cp = c + r * ldc + v * W;
        Isa::store(cp, Isa::fma(acc[r][v], va, rest(cp, v)));
      }
  };
  if (bias) {
    // The last slice of a GEMM with a bias: C = alpha * acc + beta * C + bias.
    V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = Isa::load(bias + v * W);
    if (beta == 0.0f) {
      store([&](float*, int v) { return bv[v]; });
    } else {
      store([&](float* cp, int v) { return Isa::fma(Isa::load(cp), vb, bv[v]); });
    }
  } else if (beta == 0.0f) {
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) Isa::store(c + r * ldc + v * W, Isa::mul(acc[r][v], va));
  } else if (beta == 1.0f) {
    store([&](float* cp, int) { return Isa::load(cp); });
  } else {
    store([&](float* cp, int) { return Isa::mul(Isa::load(cp), vb); });
  }
}

}  // namespace llmcc::cpu::packed
