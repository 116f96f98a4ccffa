// The bf16 GEMM on AMX tiles. Operands are packed as the tiles read them: a block of op(A) as 32
// rows of bf16 (tdpbf16ps's first operand: a tile row holds 32 values of K of one row of C), a
// panel of op(B) as pairs of bf16 (two consecutive k in 32 bits) for 32 columns, a pair row per
// two values of K (the second operand: a tile row holds one pair for each of 16 columns of C).
// C is computed in 32 x 32 blocks, each the four 16 x 16 fp32 tiles of two A tiles times two B
// tiles: the eight tile registers the unit has.
#include "kernels/cpu/gemm_amx.h"

#include "kernels/cpu/gemm_packed.h"
#include "llmcc/error.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)
#define LLMCC_HAVE_AMX 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/parallel.h"
#endif

namespace llmcc::cpu {

#if defined(LLMCC_HAVE_AMX)
namespace {

// Linux's request for a process's permission to use the AMX tile data (asm/prctl.h).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtileData = 18;

constexpr int kBlock = 32;  // rows and columns of a block of C: 2 x 2 tiles of 16 x 16
constexpr int kKStep = 32;  // values of K per tile product (a 64-byte tile row of bf16)
// Values of K per slice: a block's packed op(A) (32 rows) and a panel of packed op(B) (32
// columns) take 48 KB each, about L1, and are reused across the slice's 24 tile steps.
constexpr int kKC = 768;
// Columns of op(B) packed at once, shared by the threads: 16 panels, 768 KB of L2 at kKC.
constexpr int kNC = 512;

// The tile configuration (ldtilecfg's 64-byte layout): palette 1, tiles 0-7 of 16 rows of 64
// bytes (tiles 0-3: C, 16 fp32 per row; 4-5: A, 32 bf16 per row; 6-7: B, 16 pairs per row).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

void configure_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

// The first n of 16 lanes (none for n <= 0, all for n >= 16).
inline __mmask16 lanes(int n) { return n <= 0 ? 0 : n >= 16 ? 0xffff : static_cast<__mmask16>((1u << n) - 1); }

// 32 values from x (the first n; zeros after), as 32 bf16 in order.
inline __m512i bf16_run(const float* x, int n) {
  const __m512 lo = _mm512_maskz_loadu_ps(lanes(n), x), hi = _mm512_maskz_loadu_ps(lanes(n - 16), x + 16);
  return std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// r[i] (16 lanes) = column i of the 16 x 16 matrix of 32-bit values whose rows are r (in place).
// The zero-masking forms with every lane kept: GCC 12 warns that the plain forms read an
// undefined vector.
constexpr __mmask16 kAll32 = 0xffff;
constexpr __mmask8 kAll64 = 0xff;
void transpose16(__m512i (&r)[16]) {
  __m512i t[16], u[16];
  // Rows 2i and 2i + 1 interleaved by 32-bit lanes, then pairs of those by 64-bit lanes: each
  // 128-bit lane of u holds a 4 x 4 block of the transpose.
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_maskz_unpacklo_epi32(kAll32, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_epi32(kAll32, r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_maskz_unpacklo_epi64(kAll64, t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_maskz_unpackhi_epi64(kAll64, t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_maskz_unpacklo_epi64(kAll64, t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_maskz_unpackhi_epi64(kAll64, t[4 * i + 1], t[4 * i + 3]);
  }
  // The 4 x 4 blocks moved into place by 128-bit lanes, in two rounds.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_maskz_shuffle_i32x4(kAll32, u[i], u[4 + i], 0x88);
    t[4 + i] = _mm512_maskz_shuffle_i32x4(kAll32, u[i], u[4 + i], 0xdd);
    t[8 + i] = _mm512_maskz_shuffle_i32x4(kAll32, u[8 + i], u[12 + i], 0x88);
    t[12 + i] = _mm512_maskz_shuffle_i32x4(kAll32, u[8 + i], u[12 + i], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_maskz_shuffle_i32x4(kAll32, t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_maskz_shuffle_i32x4(kAll32, t[i], t[8 + i], 0xdd);
  }
}

// ap (32, kcp) bf16: row r is op(A) row i0 + r over k0 .. k0 + kc, zeros past kc and past row M.
void pack_a(bool trans_a, const float* A, int lda, int M, int i0, int k0, int kc, int kcp, std::uint16_t* ap) {
  const int rows = std::min(kBlock, M - i0);
  if (!trans_a) {
    // A stored (M, K): a row's values are contiguous.
    for (int r = 0; r < kBlock; ++r) {
      for (int k = 0; k < kcp; k += kKStep) {
        const __m512i run = r < rows ? bf16_run(A + static_cast<std::ptrdiff_t>(i0 + r) * lda + k0 + k, kc - k)
                                     : _mm512_setzero_si512();
        _mm512_storeu_si512(ap + r * kcp + k, run);
      }
    }
  } else {
    // A stored (K, M): rows k and k + 1 hold the block's 32 values at each, so bf16_pairs gives
    // a pair row (one pair per row of the block); 16 pair rows transposed are 16 pairs of each
    // of 16 rows, the packed layout seen as 32-bit words.
    auto* out = reinterpret_cast<std::uint32_t*>(ap);  // (32, kcp / 2) pairs
    // op(A) rows i0 + r0 .. i0 + r0 + 15 at k, zeros past kc and past row M.
    const auto run = [&](int k, int r0) {
      return k < kc ? _mm512_maskz_loadu_ps(lanes(rows - r0), A + static_cast<std::ptrdiff_t>(k0 + k) * lda + i0 + r0)
                    : _mm512_setzero_ps();
    };
    __m512i v[16];
    for (int p0 = 0; p0 < kcp / 2; p0 += 16) {
      for (int r0 = 0; r0 < kBlock; r0 += 16) {
        for (int q = 0; q < 16; ++q) v[q] = bf16_pairs(run(2 * (p0 + q), r0), run(2 * (p0 + q) + 1, r0));
        transpose16(v);
        for (int r = 0; r < 16; ++r) _mm512_storeu_si512(out + (r0 + r) * (kcp / 2) + p0, v[r]);
      }
    }
  }
}

// bp (kcp / 2, 32) pairs: pair row p, column c is (op(B)(k0 + 2p, j0 + c), op(B)(k0 + 2p + 1, j0 + c)),
// zeros past kc and past column N.
void pack_b(bool trans_b, const float* B, int ldb, int N, int j0, int k0, int kc, int kcp, std::uint32_t* bp) {
  const int cols = std::min(kBlock, N - j0);
  if (!trans_b) {
    // B stored (K, N): rows k and k + 1 are contiguous runs, interleaved into pairs.
    const auto row = [&](int k, int v) {  // op(B) row k0 + k from column j0 + v, zeros past kc
      return k < kc ? _mm512_maskz_loadu_ps(lanes(cols - v), B + static_cast<std::ptrdiff_t>(k0 + k) * ldb + j0 + v)
                    : _mm512_setzero_ps();
    };
    for (int p = 0; p < kcp / 2; ++p) {
      for (int v = 0; v < kBlock; v += 16)
        _mm512_storeu_si512(bp + p * kBlock + v, bf16_pairs(row(2 * p, v), row(2 * p + 1, v)));
    }
  } else {
    // B stored (N, K): a column's values are contiguous, so 32 of them are its 16 pairs in
    // order (little-endian: the even k in the low half); 16 columns' pairs transposed are 16
    // pair rows of the panel.
    __m512i v[16];
    for (int k = 0; k < kcp; k += kKStep) {
      for (int c0 = 0; c0 < kBlock; c0 += 16) {
        for (int c = 0; c < 16; ++c)
          v[c] = c0 + c < cols ? bf16_run(B + static_cast<std::ptrdiff_t>(j0 + c0 + c) * ldb + k0 + k, kc - k)
                               : _mm512_setzero_si512();
        transpose16(v);
        for (int q = 0; q < 16; ++q) _mm512_storeu_si512(bp + (k / 2 + q) * kBlock + c0, v[q]);
      }
    }
  }
}

// block (32, 32) fp32 = ap (32 rows of kcp bf16) . bp (kcp / 2 pair rows of 32 columns).
void block_product(const std::uint16_t* ap, const std::uint32_t* bp, int kcp, float* block) {
  const int a_stride = kcp * static_cast<int>(sizeof(std::uint16_t));
  constexpr int b_stride = kBlock * sizeof(std::uint32_t), c_stride = kBlock * sizeof(float);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int k = 0; k < kcp; k += kKStep) {
    _tile_loadd(4, ap + k, a_stride);               // rows 0-15
    _tile_loadd(5, ap + 16 * kcp + k, a_stride);    // rows 16-31
    _tile_loadd(6, bp + k / 2 * kBlock, b_stride);  // columns 0-15
    _tile_loadd(7, bp + k / 2 * kBlock + 16, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, block, c_stride);
  _tile_stored(1, block + 16, c_stride);
  _tile_stored(2, block + 16 * kBlock, c_stride);
  _tile_stored(3, block + 16 * kBlock + 16, c_stride);
}

// c (rows, cols; stride ldc) = alpha * block + (first slice: beta * c, never read when beta is 0;
// later slices: c) + bias (the last slice, when given).
void merge(const float* block, int rows, int cols, float alpha, float beta, bool first, const float* bias, float* c,
           int ldc) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int r = 0; r < rows; ++r) {
    float* row = c + static_cast<std::ptrdiff_t>(r) * ldc;
    for (int v = 0; v < kBlock; v += 16) {
      const __mmask16 m = lanes(cols - v);
      if (!m) continue;
      __m512 x = _mm512_mul_ps(va, _mm512_load_ps(block + r * kBlock + v));
      if (!first)
        x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, row + v));
      else if (beta != 0.0f)
        x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, row + v), x);
      if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + v));
      _mm512_mask_storeu_ps(row + v, m, x);
    }
  }
}

}  // namespace

bool amx_bf16_usable() {
  static const bool usable = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool tile = edx & (1u << 24), bf16 = edx & (1u << 22);
    return tile && bf16 && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return usable;
}

float amx_bf16_dot_loop(std::int64_t iters, float seed) {
  if (!amx_bf16_usable()) fail("fma peak", "the AMX tiles are not usable on this CPU or kernel");
  // Operand tiles of 2^-10 (each product 2^-20), accumulators from `seed`: sums stay normal.
  alignas(64) std::uint16_t operand[16 * 32];
  std::fill(operand, operand + 16 * 32, bf16_bits(1.0f / 1024));
  alignas(64) float acc[16 * 16];
  std::fill(acc, acc + 16 * 16, seed);
  configure_tiles();
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  _tile_loadd(0, acc, 64);
  _tile_loadd(1, acc, 64);
  _tile_loadd(2, acc, 64);
  _tile_loadd(3, acc, 64);
  for (std::int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  // Tile numbers are immediates: each accumulator stored in turn.
  float sum = 0;
  _tile_stored(0, acc, 64);
  sum += acc[0];
  _tile_stored(1, acc, 64);
  sum += acc[0];
  _tile_stored(2, acc, 64);
  sum += acc[0];
  _tile_stored(3, acc, 64);
  sum += acc[0];
  _tile_release();
  return sum;
}

void gemm_amx_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                   const float* B, int ldb, float beta, float* C, int ldc, const float* bias) {
  if (!amx_bf16_usable()) fail("gemm", "the AMX bf16 GEMM is not usable on this CPU or kernel");
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    gemm_packed_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
    return;
  }
  // The caller's packed op(B), reused by every call from this thread: it grows to the largest
  // product's size once, and a training step after the first allocates nothing.
  thread_local std::vector<std::uint32_t> bp;
  const int m_blocks = (M + kBlock - 1) / kBlock;
  const int kcp_max = (std::min(kKC, K) + kKStep - 1) / kKStep * kKStep;
  const int panels_max = (std::min(kNC, N) + kBlock - 1) / kBlock;
  if (bp.size() < static_cast<std::size_t>(kcp_max / 2) * kBlock * panels_max)
    bp.resize(static_cast<std::size_t>(kcp_max / 2) * kBlock * panels_max);
  std::uint32_t* const bpp = bp.data();
  // One team for the whole product: the threads pack a column block of op(B) together, then
  // share its blocks of C; the loops' barriers keep the packed panels until all used them. On
  // one thread no region opens (parallel.h) and the loops run in order.
  parallel_region(true, [&] {
    // Each thread's packed block of op(A), reused like bp.
    thread_local std::vector<std::uint16_t> ap;
    if (ap.size() < static_cast<std::size_t>(kBlock) * kcp_max) ap.resize(static_cast<std::size_t>(kBlock) * kcp_max);
    configure_tiles();
    for (int k0 = 0; k0 < K; k0 += kKC) {
      const int kc = std::min(kKC, K - k0), kcp = (kc + kKStep - 1) / kKStep * kKStep;
      const bool first = k0 == 0, last = k0 + kc == K;
      const std::size_t panel = static_cast<std::size_t>(kcp / 2) * kBlock;  // pairs per packed panel
      // The row block of op(A) this thread holds packed for this K slice (-1: none yet): it
      // serves every column block the thread computes in that row.
      int packed_row = -1;
      for (int j0 = 0; j0 < N; j0 += kNC) {
        const int panels = (std::min(kNC, N - j0) + kBlock - 1) / kBlock;
#pragma omp for schedule(static)
        for (int q = 0; q < panels; ++q) pack_b(trans_b, B, ldb, N, j0 + q * kBlock, k0, kc, kcp, bpp + q * panel);
        // Blocks in row order, split in contiguous runs: a thread packs a block row of op(A)
        // once for all the panels it computes in that row.
#pragma omp for schedule(static)
        for (int t = 0; t < m_blocks * panels; ++t) {
          const int bi = t / panels, q = t % panels;
          if (bi != packed_row) {
            pack_a(trans_a, A, lda, M, bi * kBlock, k0, kc, kcp, ap.data());
            packed_row = bi;
          }
          alignas(64) float block[kBlock * kBlock];
          block_product(ap.data(), bpp + q * panel, kcp, block);
          const int i0 = bi * kBlock, j = j0 + q * kBlock;
          merge(block, std::min(kBlock, M - i0), std::min(kBlock, N - j), alpha, beta, first,
                last && bias ? bias + j : nullptr, C + static_cast<std::ptrdiff_t>(i0) * ldc + j, ldc);
        }
      }
    }
    _tile_release();
  });
}

#else

bool amx_bf16_usable() { return false; }

float amx_bf16_dot_loop(std::int64_t, float) {
  fail("fma peak", "this build has no AMX bf16 kernel (it was not compiled for a CPU with AMX-BF16)");
}

void gemm_amx_bf16(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int,
                   const float*) {
  fail("gemm", "this build has no AMX bf16 GEMM (it was not compiled for a CPU with AMX-BF16)");
}

#endif

bool gemm_bf16_uses_amx(int M, int N, int K) { return M >= 16 && N >= 16 && K >= 32 && amx_bf16_usable(); }

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
               int ldb, float beta, float* C, int ldc, const float* bias) {
  if (gemm_bf16_uses_amx(M, N, K))
    gemm_amx_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
  else
    gemm_packed_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
}

const char* gemm_bf16_kernel_name() {
  return amx_bf16_usable() ? "amx_bf16 32x32 (tdpbf16ps)" : gemm_packed_bf16_kernel_name();
}

}  // namespace llmcc::cpu
