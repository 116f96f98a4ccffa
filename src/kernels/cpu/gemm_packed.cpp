// cpu::gemm_packed: the five loops of a BLIS-style GEMM around gemm_microkernel.h.
//
//   for each NC-wide block of C's columns            (jc)
//     for each KC-deep slice of the inner dimension  (pc)  pack op(B)(KC, NC) -> Bp  (L3)
//       for each MC-tall block of C's rows           (ic)  pack op(A)(MC, KC) -> Ap  (L2)
//         for each NR-wide panel of Bp               (jr)  stays in L1
//           for each MR-tall panel of Ap             (ir)  micro-kernel: one MR x NR tile
//
// Packing copies op(A) and op(B) into the order the micro-kernel reads them (contiguous, zero
// padded to whole tiles), whatever the transposes and leading dimensions, so one kernel serves
// all four cases. The buffers are allocated on a thread's first call and kept (thread_local),
// so later calls allocate nothing.
//
// A product with few rows of C (M <= GemmBlocking::stream_rows, 512 built in: the B*T rows of a
// training step's forward and d_x GEMMs, where op(B) is a weight matrix used by only those few
// rows) takes another order, the streaming one: all of op(A)'s rows for one KC slice are packed
// once (they fit in L2), and op(B) is packed one NR-wide panel at a time into a buffer that stays
// in L1, while the micro-kernels of the current panel prefetch the source of the next one. The
// blocked order above instead packs a whole KC x NC block of a weight matrix first, a pass that
// waits on memory with no arithmetic to hide it behind, then reads it back from L3 once per MC
// block (docs/perf.md, "GEMM blocking and micro-kernels"). Which order pays up to 512 rows
// depends on the CPU's caches: the autotuner measures it (gemm_blocking.h).
//
// Threads share the operand packed once per stage (op(A)'s KC slice when streaming, op(B)'s
// KC x NC block when blocked), pack it together in pieces, and then take the other operand's
// pieces (op(B) panels, or MC-row blocks of C) one at a time from a counter. Pieces are disjoint
// parts of C, so no two threads write the same element. There are no barriers (struct
// TeamState): each stage's shared operand goes into one of two shared buffers, a thread out of
// work on the current stage packs pieces of the next, and threads wait only where the data
// requires it.
//
// A bias (gemm_packed_bias) is added by the micro-kernel of each tile's last KC slice, in the
// same store, so linear's forward needs no pass over its output for it.
//
// A second product (gemm_packed.h's SecondProduct: a LoRA map's rank-r update) is packed into
// the panels of the last KC slice after the first product's values, so the micro-kernels that
// finish each tile of C add it too (struct Gemm, "slices"); op(B) may be stored in bf16 and is
// then widened or paired as it is packed (gemm_packed_b_bf16).
//
// A product whose C is only a few tiles over a long K (split_k_parts) takes neither order as a
// team: K goes in parts, each part a one-thread product into a buffer, and C is their sum.
#include "kernels/cpu/gemm_packed.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm_blocking.h"
#include "kernels/cpu/gemm_microkernel.h"
#include "kernels/cpu/gemm_skinny.h"
#include "kernels/cpu/gemm_strides.h"
#include "kernels/cpu/gemv.h"

namespace llmcc::cpu {
namespace {

using packed::Isa;
using packed::kMR;
using packed::kNR;
using std::ptrdiff_t;

// Products smaller than this (M*N*K) run on the calling thread: waking a team costs more.
constexpr double kParallelMinWork = 1 << 18;

// The streaming order takes at most GemmBlocking::stream_rows rows of C and packs the op(A)
// slice of all of them (rows rounded up to kMR, times KC) in at most GemmBlocking::stream_a
// floats, which sets KC for that order. The built-in stream_a for AVX2, 258 x 256 (258 KB, about
// half of Zen 3's L2), is a training step's 256 rows at B=4, T=64 with KC 256, so that K = 768
// goes in 3 slices instead of 4 (64 K floats, KC 192): one pass over C and one tile start fewer
// (docs/perf.md, "GEMM blocking and micro-kernels").

// A buffer of floats, 64-byte aligned, that grows to the largest size asked of it and is kept:
// once a thread has run a product of every kind it will see, it allocates nothing more.
struct GrowingBuffer {
  float* data = nullptr;
  std::size_t floats = 0;
  GrowingBuffer() = default;
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  ~GrowingBuffer() { std::free(data); }
  float* fit(std::size_t need) {
    if (need <= floats) return data;
    std::free(data);
    const std::size_t bytes = (sizeof(float) * need + 63) / 64 * 64;
    data = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!data) {
      std::fprintf(stderr, "llmcc: gemm_packed could not allocate a packing buffer (%zu bytes)\n", bytes);
      std::abort();
    }
    floats = need;
    return data;
  }
};

// Floats of a packed op(A) block (MC x KC) or streaming slice, and of a packed op(B) block.
std::size_t a_buffer_floats(const GemmBlocking& b) {
  return std::max(static_cast<std::size_t>(b.mc) * b.kc, static_cast<std::size_t>(b.stream_a));
}
std::size_t b_buffer_floats(const GemmBlocking& b) { return static_cast<std::size_t>(b.kc) * b.nc; }

// One thread's packing buffers: Ap (MC, KC) or the streaming op(A) slice, Bp (KC, NC), and the
// streaming order's single op(B) panel (KC, kNR), sized for the blocking of the product at hand.
// Not on huge pages (tensor/large_alloc.h): the step's GEMMs are slower with them there
// (docs/perf.md, "GEMM blocking and micro-kernels").
struct PackBuffers {
  GrowingBuffer a_buf, b_buf, panel_buf;
  float* a = nullptr;
  float* b = nullptr;
  float* b_panel = nullptr;
  void fit(const GemmBlocking& blk) {
    a = a_buf.fit(a_buffer_floats(blk));
    b = b_buf.fit(b_buffer_floats(blk));
    b_panel = panel_buf.fit(static_cast<std::size_t>(blk.kc) * kNR);
  }
};

// The calling thread's buffers, fitted to `blk`.
PackBuffers& thread_buffers(const GemmBlocking& blk) {
  thread_local PackBuffers buffers;
  buffers.fit(blk);
  return buffers;
}

// One slice of K as the loops below go through them: [pc, pc + kc) of the first product, then
// (k2 > 0, the last slice only) the second product's K2 values in the same panels; or (second)
// the whole of the second product's K as a slice after the first's.
struct Slice {
  int pc, kc;
  bool second;
  int k2;
};

// The product (gemm_strides.h) and the cache blocking of this call. op(B) is read from B, or
// when b16 is set, from b16 (bf16 bits) at the same strides, B then null. A second product
// (second.K > 0, gemm_packed.h) joins the first product's last slice (second_in_last), else is
// one more slice after the first product's.
struct Gemm : GemmProblem {
  GemmBlocking blk;
  const std::uint16_t* b16 = nullptr;
  SecondProduct second{};
  ptrdiff_t a2_row = 0, a2_col = 0, b2_row = 0, b2_col = 0;  // the second product's strides
  bool second_in_last = false;  // the second product joins the first's last slice, else its own

  // The slices of K for slices of kc_block of the first product: its own, then the second's
  // when it has a slice of its own.
  int first_slices(int kc_block) const { return (K + kc_block - 1) / kc_block; }
  int slices(int kc_block) const { return first_slices(kc_block) + (second.K > 0 && !second_in_last ? 1 : 0); }
  Slice slice(int s, int kc_block) const {
    const int first = first_slices(kc_block);
    if (s < first) {
      const int k2 = second_in_last && s == first - 1 ? second.K : 0;
      return {s * kc_block, std::min(kc_block, K - s * kc_block), false, k2};
    }
    return {0, second.K, true, 0};
  }
  float slice_alpha(const Slice& sl) const { return sl.second ? second.alpha : alpha; }

  // Steps of the micro-kernel over slice sl.
  template <class P>
  static int steps(const Slice& sl) {
    return P::steps(sl.kc) + (sl.k2 > 0 ? P::steps(sl.k2) : 0);
  }

  // Packs op(A)'s mc x kc block at row i of slice sl into ap with P::pack_a; with k2, each row
  // tile's panel continues with the second product's op(A2) values.
  template <class P>
  void pack_a(const Slice& sl, int i, int mc, typename P::Elem* ap) const {
    if (sl.second) {
      P::pack_a(mc, sl.kc, second.A + i * a2_row, a2_row, a2_col, ap);
    } else if (sl.k2 == 0) {
      P::pack_a(mc, sl.kc, A + i * a_row + sl.pc * a_col, a_row, a_col, ap);
    } else {
      const int first = P::steps(sl.kc), all = steps<P>(sl);
      for (int t = 0; t < mc; t += kMR) {
        const int mr = std::min(kMR, mc - t);
        P::pack_a(mr, sl.kc, A + (i + t) * a_row + sl.pc * a_col, a_row, a_col, ap + t * all);
        P::pack_a(mr, sl.k2, second.A + (i + t) * a2_row, a2_row, a2_col, ap + t * all + kMR * first);
      }
    }
  }

  // Packs op(B)'s kc x nc block at column j of slice sl into bp with P::pack_b, from whichever
  // source holds it; with k2, each column panel continues with op(B2)'s values.
  template <class P>
  void pack_b(const Slice& sl, int j, int nc, typename P::Elem* bp) const {
    if (sl.second) {
      P::pack_b(sl.kc, nc, second.B + j * b2_col, b2_row, b2_col, bp);
      return;
    }
    const int first = P::steps(sl.kc), all = steps<P>(sl);
    const int panel = sl.k2 > 0 ? kNR : nc;  // columns packed per call
    for (int jr = 0; jr < nc; jr += panel) {
      const int nr = std::min(panel, nc - jr);
      typename P::Elem* dst = bp + jr * all;
      const ptrdiff_t offset = sl.pc * b_row + (j + jr) * b_col;
      if (b16) {
        P::pack_b(sl.kc, nr, b16 + offset, b_row, b_col, dst);
      } else {
        P::pack_b(sl.kc, nr, B + offset, b_row, b_col, dst);
      }
      if (sl.k2 > 0) P::pack_b(sl.k2, nr, second.B + (j + jr) * b2_col, b2_row, b2_col, dst + kNR * first);
    }
  }

  // The bias for the tile at column j of slice sl: only the last slice adds it.
  const float* tile_bias(const Slice& sl, int j) const {
    const bool last = second.K > 0 && !second_in_last ? sl.second : sl.pc + sl.kc == K;
    return bias && last ? bias + j : nullptr;
  }
};

// A source element as a float: floats as they are, bf16 bits widened (exact).
inline float source_value(float x) { return x; }
inline float source_value(std::uint16_t bits) { return bf16_to_float(bits); }

#if defined(__AVX2__)
// Eight consecutive source elements as floats.
inline __m256 load8(const float* src) { return _mm256_loadu_ps(src); }
inline __m256 load8(const std::uint16_t* src) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
#endif

// dst[p * dst_stride + r] = src[r * src_stride + p] for r < rows (at most 8), p < kc, as floats:
// a transposing copy (widening bf16 sources), 8 x 8 blocks through AVX registers where
// available.
template <class T>
void copy_transposed(const T* src, ptrdiff_t src_stride, int rows, int kc, float* dst, int dst_stride) {
  int p = 0;
#if defined(__AVX2__)
  for (; p + 8 <= kc; p += 8) {
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = i < rows ? load8(src + i * src_stride + p) : _mm256_setzero_ps();
    // r[i] = row i, steps p..p+7 -> c[q] = step p+q, rows 0..7.
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 c[8] = {_mm256_permute2f128_ps(s0, s4, 0x20), _mm256_permute2f128_ps(s1, s5, 0x20),
                         _mm256_permute2f128_ps(s2, s6, 0x20), _mm256_permute2f128_ps(s3, s7, 0x20),
                         _mm256_permute2f128_ps(s0, s4, 0x31), _mm256_permute2f128_ps(s1, s5, 0x31),
                         _mm256_permute2f128_ps(s2, s6, 0x31), _mm256_permute2f128_ps(s3, s7, 0x31)};
    for (int q = 0; q < 8; ++q) {
      float* d = dst + (p + q) * dst_stride;
      if (rows == 8) {
        _mm256_storeu_ps(d, c[q]);
      } else if (rows == 6) {
        _mm_storeu_ps(d, _mm256_castps256_ps128(c[q]));
        _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(c[q], 1));
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, c[q]);
        for (int i = 0; i < rows; ++i) d[i] = tmp[i];
      }
    }
  }
#endif
  for (; p < kc; ++p)
    for (int i = 0; i < rows; ++i) dst[p * dst_stride + i] = source_value(src[i * src_stride + p]);
}

// Ap (panels of kMR rows, each kc steps of kMR values) from op(A)(mc, kc) at a; rows past mc
// are zero.
[[gnu::noinline]] void pack_a_floats(int mc, int kc, const float* a, ptrdiff_t a_row, ptrdiff_t a_col, float* ap) {
  for (int i0 = 0; i0 < mc; i0 += kMR, ap += kMR * kc) {
    const int mr = std::min(kMR, mc - i0);
    const float* src = a + i0 * a_row;
    if (a_row == 1 && mr == kMR) {
      // A stored (K, M): each step's kMR values are contiguous.
      for (int p = 0; p < kc; ++p) std::memcpy(ap + p * kMR, src + p * a_col, sizeof(float) * kMR);
    } else if (a_col == 1 && mr == kMR) {
      // A stored (M, K): each row's steps are contiguous; transpose 8 rows at a time. Each
      // panel starts kMR new streams, rows 3-12 KB apart (each in its own 4 KB page), which the
      // hardware prefetchers pick up only after a few misses: the first 4 lines of the next
      // panel's rows are requested now. Whole rows cost more than they save, and the same for
      // op(B)'s transposed panels gains nothing (docs/perf.md, "GEMM blocking and
      // micro-kernels"; docs/perf-log.md).
      if (i0 + kMR < mc) {
        const float* next = src + kMR * a_row;
        for (int r = 0; r < std::min(kMR, mc - i0 - kMR); ++r)
          for (int p = 0; p < std::min(kc, 64); p += 16) __builtin_prefetch(next + r * a_row + p, 0, 3);
      }
      for (int r0 = 0; r0 < kMR; r0 += 8)
        copy_transposed(src + r0 * a_row, a_row, std::min(8, kMR - r0), kc, ap + r0, kMR);
    } else {
      for (int p = 0; p < kc; ++p) {
        for (int r = 0; r < mr; ++r) ap[p * kMR + r] = src[r * a_row + p * a_col];
        for (int r = mr; r < kMR; ++r) ap[p * kMR + r] = 0.0f;
      }
    }
  }
}

// dst[i] = src[i] as floats for i < n.
inline void copy_values(const float* src, float* dst, int n) { std::memcpy(dst, src, sizeof(float) * n); }
inline void copy_values(const std::uint16_t* src, float* dst, int n) { bf16_to_floats(src, dst, n); }

// Bp (panels of kNR columns, each kc steps of kNR values) from op(B)(kc, nc) at b, floats or
// bf16 bits (widened); columns past nc are zero.
template <class T>
[[gnu::noinline]] void pack_b_floats(int kc, int nc, const T* b, ptrdiff_t b_row, ptrdiff_t b_col, float* bp) {
  for (int j0 = 0; j0 < nc; j0 += kNR, bp += kNR * kc) {
    const int nr = std::min(kNR, nc - j0);
    const T* src = b + j0 * b_col;
    if (b_col == 1 && nr == kNR) {
      // B stored (K, N): each step's kNR values are contiguous.
      for (int p = 0; p < kc; ++p) copy_values(src + p * b_row, bp + p * kNR, kNR);
    } else if (b_row == 1 && nr == kNR) {
      // B stored (N, K): each column's steps are contiguous; transpose 8 columns at a time.
      for (int j0 = 0; j0 < kNR; j0 += 8)
        copy_transposed(src + j0 * b_col, b_col, std::min(8, kNR - j0), kc, bp + j0, kNR);
    } else {
      for (int p = 0; p < kc; ++p) {
        for (int j = 0; j < nr; ++j) bp[p * kNR + j] = source_value(src[p * b_row + j * b_col]);
        for (int j = nr; j < kNR; ++j) bp[p * kNR + j] = 0.0f;
      }
    }
  }
}

#if defined(__AVX512BF16__)
// One bf16 pair, for the packing loops' edges.
inline std::uint32_t bf16_pair(float lo, float hi) {
  return static_cast<std::uint32_t>(bf16_bits(lo)) | static_cast<std::uint32_t>(bf16_bits(hi)) << 16;
}

// dst[p * dst_stride + i] = the pair (x_i[2p], x_i[2p + 1]) for rows i < `rows` (at most 8) and
// p < (kc + 1) / 2, where x_i = src + i * src_stride holds kc values (an odd kc's last pair ends
// in 0): a row's pairs are its consecutive values, converted 16 values at a time and transposed
// as 32-bit values through a 256-byte block, so the conversion leaves nothing to re-read.
void pairs_transposed(const float* src, ptrdiff_t src_stride, int rows, int kc, std::uint32_t* dst, int dst_stride) {
  const int whole = kc / 16 * 8;           // pairs in whole blocks of 16 values
  alignas(64) std::uint32_t block[8 * 8];  // (row, pair)
  for (int p0 = 0; p0 < whole; p0 += 8) {
    for (int i = 0; i < rows; ++i) {
      const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i * src_stride + 2 * p0));
      _mm256_store_si256(reinterpret_cast<__m256i*>(block + 8 * i), std::bit_cast<__m256i>(v));
    }
    copy_transposed(reinterpret_cast<const float*>(block), 8, rows, 8, reinterpret_cast<float*>(dst + p0 * dst_stride),
                    dst_stride);
  }
  for (int p = whole; p < (kc + 1) / 2; ++p) {
    for (int i = 0; i < rows; ++i) {
      const float* x = src + i * src_stride + 2 * p;
      dst[p * dst_stride + i] = bf16_pair(x[0], 2 * p + 1 < kc ? x[1] : 0.0f);
    }
  }
}

// Ap as bf16 pairs: panels of kMR rows, each (kc + 1) / 2 steps of kMR pairs, from op(A)(mc, kc)
// at a; rows past mc and an odd kc's last half pair are zero.
[[gnu::noinline]] void pack_a_pairs(int mc, int kc, const float* a, ptrdiff_t a_row, ptrdiff_t a_col,
                                    std::uint32_t* ap) {
  const int steps = (kc + 1) / 2;
  for (int i0 = 0; i0 < mc; i0 += kMR, ap += kMR * steps) {
    const int mr = std::min(kMR, mc - i0);
    const float* src = a + i0 * a_row;
    if (a_col == 1 && mr == kMR) {
      // A stored (M, K): a row's pairs are its consecutive values; 8 rows at a time.
      for (int r0 = 0; r0 < kMR; r0 += 8)
        pairs_transposed(src + r0 * a_row, a_row, std::min(8, kMR - r0), kc, ap + r0, kMR);
    } else if (a_row == 1 && mr == kMR) {
      // A stored (K, M): a step's kMR values at k = 2p and at 2p + 1 are two contiguous runs.
      static_assert(kMR <= 16, "one vector holds a step's rows");
      constexpr __mmask16 rows = static_cast<__mmask16>((1u << kMR) - 1);
      for (int p = 0; p < steps; ++p) {
        const __m512 lo = _mm512_maskz_loadu_ps(rows, src + 2 * p * a_col);
        const __m512 hi = 2 * p + 1 < kc ? _mm512_maskz_loadu_ps(rows, src + (2 * p + 1) * a_col) : _mm512_setzero_ps();
        _mm512_mask_storeu_epi32(ap + p * kMR, rows, bf16_pairs(lo, hi));
      }
    } else {
      for (int p = 0; p < steps; ++p) {
        for (int r = 0; r < mr; ++r) {
          const float* x = src + r * a_row + 2 * p * a_col;
          ap[p * kMR + r] = bf16_pair(x[0], 2 * p + 1 < kc ? x[a_col] : 0.0f);
        }
        for (int r = mr; r < kMR; ++r) ap[p * kMR + r] = 0;
      }
    }
  }
}

// Bp as bf16 pairs: panels of kNR columns, each (kc + 1) / 2 steps of kNR pairs, from
// op(B)(kc, nc) at b; columns past nc and an odd kc's last half pair are zero.
[[gnu::noinline]] void pack_b_pairs(int kc, int nc, const float* b, ptrdiff_t b_row, ptrdiff_t b_col,
                                    std::uint32_t* bp) {
  const int steps = (kc + 1) / 2;
  static_assert(kNR % 16 == 0, "a step's columns fill whole vectors");
  for (int j0 = 0; j0 < nc; j0 += kNR, bp += kNR * steps) {
    const int nr = std::min(kNR, nc - j0);
    const float* src = b + j0 * b_col;
    if (b_col == 1 && nr == kNR) {
      // B stored (K, N): a step's kNR values at k = 2p and at 2p + 1 are two contiguous runs.
      for (int p = 0; p < steps; ++p) {
        const bool has_hi = 2 * p + 1 < kc;
        const float* lo = src + 2 * p * b_row;
        const float* hi = has_hi ? lo + b_row : lo;  // past an odd kc's last value: not read
        for (int v = 0; v < kNR; v += 16)
          _mm512_storeu_si512(bp + p * kNR + v, bf16_pairs(_mm512_loadu_ps(lo + v),
                                                           has_hi ? _mm512_loadu_ps(hi + v) : _mm512_setzero_ps()));
      }
    } else if (b_row == 1 && nr == kNR) {
      // B stored (N, K): a column's pairs are its consecutive values; 8 columns at a time.
      for (int c0 = 0; c0 < kNR; c0 += 8) pairs_transposed(src + c0 * b_col, b_col, 8, kc, bp + c0, kNR);
    } else {
      for (int p = 0; p < steps; ++p) {
        for (int j = 0; j < nr; ++j) {
          const float* x = src + j * b_col + 2 * p * b_row;
          bp[p * kNR + j] = bf16_pair(x[0], 2 * p + 1 < kc ? x[b_row] : 0.0f);
        }
        for (int j = nr; j < kNR; ++j) bp[p * kNR + j] = 0;
      }
    }
  }
}

// Bp as bf16 pairs, as above, from op(B) stored in bf16: the pairs are its values as they are.
[[gnu::noinline]] void pack_b_pairs(int kc, int nc, const std::uint16_t* b, ptrdiff_t b_row, ptrdiff_t b_col,
                                    std::uint32_t* bp) {
  const int steps = (kc + 1) / 2, whole = kc / 2;
  static_assert(kNR % 16 == 0, "a step's columns fill whole vectors");
  for (int j0 = 0; j0 < nc; j0 += kNR, bp += kNR * steps) {
    const int nr = std::min(kNR, nc - j0);
    const std::uint16_t* src = b + j0 * b_col;
    if (b_col == 1 && nr == kNR) {
      // B stored (K, N): step p interleaves the kNR values at k = 2p (low halves) and at 2p + 1
      // (high halves), two contiguous runs.
      for (int p = 0; p < steps; ++p) {
        const std::uint16_t* lo = src + 2 * p * b_row;
        // The zero-masked forms with every lane set: GCC 12 warns of the plain forms' undefined
        // pass-through operand.
        constexpr __mmask16 all = 0xFFFF;
        for (int v = 0; v < kNR; v += 16) {
          const __m256i lo_bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + v));
          const __m512i low = _mm512_maskz_cvtepu16_epi32(all, lo_bits);
          __m512i high = _mm512_setzero_si512();
          if (2 * p + 1 < kc) {
            const __m256i hi_bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + b_row + v));
            high = _mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, hi_bits), 16);
          }
          _mm512_storeu_si512(bp + p * kNR + v, _mm512_or_si512(low, high));
        }
      }
    } else if (b_row == 1 && b_col % 2 == 0 && reinterpret_cast<std::uintptr_t>(src) % 4 == 0 && nr == kNR) {
      // B stored (N, K) at an even stride, 4-byte aligned: a column's pairs are its consecutive
      // 32-bit words, transposed 8 columns at a time (moved as floats' bits, never computed on);
      // an odd kc's last value pairs with 0.
      for (int c0 = 0; c0 < kNR; c0 += 8)
        copy_transposed(reinterpret_cast<const float*>(src + c0 * b_col), b_col / 2, 8, whole,
                        reinterpret_cast<float*>(bp + c0), kNR);
      if (whole < steps)
        for (int j = 0; j < kNR; ++j) bp[whole * kNR + j] = src[j * b_col + kc - 1];
    } else {
      for (int p = 0; p < steps; ++p) {
        for (int j = 0; j < nr; ++j) {
          const std::uint16_t* x = src + j * b_col + 2 * p * b_row;
          bp[p * kNR + j] = x[0] | (2 * p + 1 < kc ? static_cast<std::uint32_t>(x[b_row]) << 16 : 0u);
        }
        for (int j = nr; j < kNR; ++j) bp[p * kNR + j] = 0;
      }
    }
  }
}
#endif

// How a GEMM's operands are packed and multiplied; the loops below are templates over it.
//   Elem      the packed panels' element type
//   Step      the micro-kernel's k step (gemm_microkernel.h)
//   kKUnit    slices of K are multiples of this (but the last)
//   steps(kc) the steps of a panel that covers kc values of K
// Panels of floats: the fp32 GEMM's, and with RoundToBf16 the bf16 GEMM's where vdpbf16ps is
// not available: the packed values are rounded to bf16, so the fp32 micro-kernel multiplies the
// same operands as vdpbf16ps would (each product exact in fp32), and sums them in fp32.
template <bool RoundToBf16>
struct FloatPanels {
  using Elem = float;
  using Step = packed::Fp32Step;
  static constexpr int kKUnit = 1;
  static int steps(int kc) { return kc; }
  static GemmBlocking blocking(const GemmBlocking& b) { return b; }
  static void pack_a(int mc, int kc, const float* a, ptrdiff_t a_row, ptrdiff_t a_col, float* ap) {
    pack_a_floats(mc, kc, a, a_row, a_col, ap);
    if (RoundToBf16) round_floats_to_bf16(ap, static_cast<std::int64_t>((mc + kMR - 1) / kMR) * kMR * kc);
  }
  static void pack_b(int kc, int nc, const float* b, ptrdiff_t b_row, ptrdiff_t b_col, float* bp) {
    pack_b_floats(kc, nc, b, b_row, b_col, bp);
    if (RoundToBf16) round_floats_to_bf16(bp, static_cast<std::int64_t>((nc + kNR - 1) / kNR) * kNR * kc);
  }
  // Values already in bf16: widened, with nothing to round.
  static void pack_b(int kc, int nc, const std::uint16_t* b, ptrdiff_t b_row, ptrdiff_t b_col, float* bp) {
    pack_b_floats(kc, nc, b, b_row, b_col, bp);
  }
};
using Fp32Panels = FloatPanels<false>;

#if defined(__AVX512BF16__)
// Panels of bf16 pairs (two values of K in 32 bits), multiplied by vdpbf16ps. KC slices are
// even, so only a product's last slice can end in half a pair.
struct Bf16PairPanels {
  using Elem = std::uint32_t;
  using Step = packed::Bf16PairStep;
  static constexpr int kKUnit = 2;
  static int steps(int kc) { return (kc + 1) / 2; }
  // Slices of twice the blocking's KC in pairs, 4 KC values of K: an op(B) panel of 2 KC x NR
  // pairs (96 KB at KC 384) streams from L2 as the fp32 one does, and C, which a product of
  // 1,024 rows keeps in L3 or memory, is read and written half as often as with 2 KC values,
  // which counts where two threads share the L3 and memory (docs/perf.md, "bf16 mixed
  // precision").
  static GemmBlocking blocking(GemmBlocking b) {
    b.kc *= 2;
    return b;
  }
  static void pack_a(int mc, int kc, const float* a, ptrdiff_t a_row, ptrdiff_t a_col, std::uint32_t* ap) {
    pack_a_pairs(mc, kc, a, a_row, a_col, ap);
  }
  static void pack_b(int kc, int nc, const float* b, ptrdiff_t b_row, ptrdiff_t b_col, std::uint32_t* bp) {
    pack_b_pairs(kc, nc, b, b_row, b_col, bp);
  }
  static void pack_b(int kc, int nc, const std::uint16_t* b, ptrdiff_t b_row, ptrdiff_t b_col, std::uint32_t* bp) {
    pack_b_pairs(kc, nc, b, b_row, b_col, bp);
  }
};
using Bf16Panels = Bf16PairPanels;
#else
using Bf16Panels = FloatPanels<true>;
#endif

// A tile narrower than kNR (N not a multiple of kNR): the micro-kernel writes a full tile to the
// stack, and only its mr x nr corner is merged into C. A tile at most one vector wide takes the
// micro-kernel of one vector per row, half the arithmetic of a full tile with AVX-512 or AVX2
// (the rank-16 products of LoRA adapters are such products); a full-height one exactly one vector
// wide stores straight into C.
// bias: nr values or null.
template <class P>
[[gnu::noinline]] void edge_tile(int steps, const typename P::Elem* ap, const typename P::Elem* bp, float* c,
                                 ptrdiff_t ldc, int mr, int nr, float alpha, float beta, const float* bias) {
  constexpr int W = Isa::kWidth;
  if (Isa::kNV > 1 && nr == W && mr == kMR) {
    packed::microkernel<typename P::Step, kMR, 1>(steps, ap, bp, c, ldc, alpha, beta, bias);
    return;
  }
  alignas(64) float tile[kMR * kNR];
  if (Isa::kNV > 1 && nr <= W) {
    packed::microkernel<typename P::Step, kMR, 1>(steps, ap, bp, tile, kNR, alpha, 0.0f);
  } else {
    packed::microkernel<typename P::Step>(steps, ap, bp, tile, kNR, alpha, 0.0f);
  }
  for (int r = 0; r < mr; ++r) {
    float* crow = c + r * ldc;
    const float* trow = tile + r * kNR;
    if (beta == 0.0f) {
      for (int j = 0; j < nr; ++j) crow[j] = trow[j];
    } else {
      for (int j = 0; j < nr; ++j) crow[j] = trow[j] + beta * crow[j];
    }
    if (bias) {
      for (int j = 0; j < nr; ++j) crow[j] += bias[j];
    }
  }
}

// The micro-kernels for full-width tiles of 1 .. kMR - 1 rows (the last row tile of C when its
// row count is not a multiple of kMR: 4 rows of 256 = 42 x 6 + 4), indexed by rows - 1. They
// store straight into C, with the arithmetic of a full tile, at the cost of their own rows:
// through edge_tile such a tile would cost a full one plus a copy (at 256 rows, one tile in 43).
template <class P>
using TileKernel = void (*)(int, const typename P::Elem*, const typename P::Elem*, float*, ptrdiff_t, float, float,
                            const float*);
template <class P, int... R>
constexpr std::array<TileKernel<P>, sizeof...(R)> short_tile_kernels(std::integer_sequence<int, R...>) {
  return {&packed::microkernel<typename P::Step, R + 1>...};
}
template <class P>
constexpr auto kShortTileKernels = short_tile_kernels<P>(std::make_integer_sequence<int, kMR - 1>{});

// One tile of C at c (mr x nr, at most kMR x kNR): the full micro-kernel, the one for fewer rows,
// or edge_tile for a narrow one.
template <class P>
inline void tile(int steps, const typename P::Elem* ap, const typename P::Elem* bp, float* c, ptrdiff_t ldc, int mr,
                 int nr, float alpha, float beta, const float* bias) {
  if (nr < kNR) {
    edge_tile<P>(steps, ap, bp, c, ldc, mr, nr, alpha, beta, bias);
  } else if (mr == kMR) {
    packed::microkernel<typename P::Step>(steps, ap, bp, c, ldc, alpha, beta, bias);
  } else {
    kShortTileKernels<P>[static_cast<std::size_t>(mr - 1)](steps, ap, bp, c, ldc, alpha, beta, bias);
  }
}

// Splits n into ceil(n / block) nearly equal blocks, each rounded up to a multiple of unit
// (no thin remainder block): returns the block size. block must be a multiple of unit.
int balanced_block(int n, int block, int unit) {
  const int count = (n + block - 1) / block;
  const int size = (n + count - 1) / count;
  return std::min(block, (size + unit - 1) / unit * unit);
}

// The cache lines of one op(B) panel (kc steps of nr <= kNR columns at src) still to be
// prefetched, handed out a few at a time so the requests spread over the current panel's
// micro-kernels instead of queueing all at once.
class PanelPrefetch {
 public:
  PanelPrefetch() = default;
  // src: the panel's first element, of `elem` bytes; strides in elements.
  PanelPrefetch(const void* src, int elem, int kc, int nr, ptrdiff_t b_row, ptrdiff_t b_col) {
    if (b_col == 1) {
      // A step's nr values are contiguous: per step, its first and its last value's lines.
      units_ = kc, lines_ = 2;
      unit_stride_ = b_row * elem, line_stride_ = (nr - 1) * elem;
    } else {
      // A column's kc steps are contiguous: per column, a line every 64 bytes and the last.
      units_ = nr, lines_ = kc * elem / 64 + 1;
      unit_stride_ = b_col * elem, line_stride_ = 64;
      last_line_ = (kc - 1) * elem;
    }
    unit_ptr_ = static_cast<const char*>(src);
  }
  int total() const { return units_ * lines_; }
  void issue(int count) {
    for (; count > 0 && unit_ < units_; --count) {
      const ptrdiff_t offset = std::min<ptrdiff_t>(line_ * line_stride_, last_line_);
      __builtin_prefetch(unit_ptr_ + offset, 0, 2);
      if (++line_ == lines_) {
        line_ = 0;
        ++unit_;
        unit_ptr_ += unit_stride_;
      }
    }
  }

 private:
  const char* unit_ptr_ = nullptr;
  int units_ = 0, lines_ = 1, unit_ = 0, line_ = 0;
  ptrdiff_t unit_stride_ = 0, line_stride_ = 0, last_line_ = PTRDIFF_MAX;  // in bytes
};

// KC, the depth of one slice of K, for either order. It depends on M and K alone, never on the
// thread count: which order runs can (a narrow product of few rows streams on one thread but
// not on two), and each element of C sums its K slices in order, so one KC for both orders
// gives the same bits on any number of threads. Up to blk.stream_rows rows it is the streaming
// order's, whose op(A) slice of all rows times KC fits in blk.stream_a floats.
// Slices are multiples of `unit` (P::kKUnit: the values of K per packed element) but the last,
// and hold up to KC packed elements, unit x KC values of K (the bf16 pair panels are given
// twice the KC: Bf16PairPanels::blocking).
int slice_kc(const GemmBlocking& blk, int M, int K, int unit) {
  const int kc_max = blk.kc * unit;
  if (M > blk.stream_rows) return balanced_block(K, kc_max, unit);
  const int m_padded = (M + kMR - 1) / kMR * kMR;
  return balanced_block(K, std::min(kc_max, blk.stream_a * unit / m_padded / unit * unit), unit);
}

// The source of the op(B) panel of slice sl that starts at column j.
PanelPrefetch panel_source(const Gemm& g, const Slice& sl, int j) {
  const int nr = std::min(kNR, g.N - j);
  if (sl.second) return PanelPrefetch(g.second.B + j * g.b2_col, sizeof(float), sl.kc, nr, g.b2_row, g.b2_col);
  const ptrdiff_t offset = sl.pc * g.b_row + j * g.b_col;
  if (g.b16) return PanelPrefetch(g.b16 + offset, sizeof(std::uint16_t), sl.kc, nr, g.b_row, g.b_col);
  return PanelPrefetch(g.B + offset, sizeof(float), sl.kc, nr, g.b_row, g.b_col);
}

// One packed op(B) panel bp (kc x nr, C's columns jr..) times every row tile of the packed
// op(A) slice ap (all g.M rows); `next` is prefetched a few lines before each tile.
template <class P>
void panel_times_slice(const Gemm& g, int steps, float alpha, float beta, const float* bias, const typename P::Elem* ap,
                       const typename P::Elem* bp, int jr, int nr, PanelPrefetch& next) {
  const int m_tiles = (g.M + kMR - 1) / kMR;
  const int per_tile = (next.total() + m_tiles - 1) / m_tiles;
  float* c_panel = g.C + jr;
  for (int ir = 0; ir < g.M; ir += kMR) {
    next.issue(per_tile);
    tile<P>(steps, ap + ir * steps, bp, c_panel + ir * g.ldc, g.ldc, std::min(kMR, g.M - ir), nr, alpha, beta, bias);
  }
}

// The tiles of one block of C: the packed op(A) block ap (mc rows from ic) times the packed
// op(B) block bp (nc columns from jc).
// bias: the block's nc values, or null.
template <class P>
void block_times_block(const Gemm& g, int ic, int mc, int jc, int nc, int steps, float alpha, float beta,
                       const float* bias, const typename P::Elem* ap, const typename P::Elem* bp) {
  for (int jr = 0; jr < nc; jr += kNR) {
    const int nr = std::min(kNR, nc - jr);
    const float* tile_bias = bias ? bias + jr : nullptr;
    for (int ir = 0; ir < mc; ir += kMR) {
      tile<P>(steps, ap + ir * steps, bp + jr * steps, g.C + (ic + ir) * g.ldc + jc + jr, g.ldc, std::min(kMR, mc - ir),
              nr, alpha, beta, tile_bias);
    }
  }
}

// The blocked order's block sizes and counts for one call, worked out once by the caller (they
// size TeamState) and followed by every thread. With company, MC gives at least about four row
// blocks per thread, so there is work left to take from a slow one; whole tiles, or every block
// would end in a partial one.
struct BlockedPlan {
  int nc_block, kc_block, mc_block;
  int m_blocks, n_slices, n_blocks;  // row blocks of C; K slices; KC x NC blocks of op(B)
};

// second_slices: 1 with a second product in a slice of its own (after the first product's), else 0.
BlockedPlan blocked_plan(const GemmBlocking& blk, int M, int N, int K, int threads, int k_unit, int second_slices) {
  BlockedPlan p{};
  p.nc_block = balanced_block(N, blk.nc, kNR);
  p.kc_block = slice_kc(blk, M, K, k_unit);
  const int mc_rows = threads > 1 ? (M + 4 * threads - 1) / (4 * threads) : M;
  const int mc_target = (mc_rows + kMR - 1) / kMR * kMR;
  p.mc_block = balanced_block(M, std::min(blk.mc, mc_target), kMR);
  p.m_blocks = (M + p.mc_block - 1) / p.mc_block;
  p.n_slices = (K + p.kc_block - 1) / p.kc_block + second_slices;
  p.n_blocks = (N + p.nc_block - 1) / p.nc_block * p.n_slices;
  return p;
}

// Progress of one stage of a parallel call: a KC x NC block of op(B) in the blocked order, a KC
// slice in the streaming order. The stage's shared operand is packed in pieces, then its work
// items (MC-row blocks of C, or op(B) panels) are multiplied; counts taken and finished of each.
struct StageProgress {
  std::atomic<int> pack_taken{0}, pack_done{0}, items_taken{0}, items_done{0};
};

// The shared state of one parallel call, kept by the calling thread between calls (it grows to
// the largest call seen, so a training step's calls allocate nothing after the first): per stage
// its progress, per work item the number of stages finished on it (an item's part of C
// accumulates over the stages of K), and a second buffer for the shared operand, so that the
// next stage can be packed while the current one is still being multiplied.
struct TeamState {
  std::unique_ptr<StageProgress[]> stages;
  std::unique_ptr<std::atomic<int>[]> items;
  int stage_capacity = 0, item_capacity = 0;
  GrowingBuffer second;  // for either order's shared operand
  float* second_buffer = nullptr;

  void reset(const GemmBlocking& blk, int n_stages, int n_items, bool need_second_buffer) {
    if (n_stages > stage_capacity) {
      stages = std::make_unique<StageProgress[]>(n_stages);
      stage_capacity = n_stages;
    }
    if (n_items > item_capacity) {
      items = std::make_unique<std::atomic<int>[]>(n_items);
      item_capacity = n_items;
    }
    for (int i = 0; i < n_stages; ++i) {
      StageProgress& st = stages[i];
      st.pack_taken.store(0, std::memory_order_relaxed);
      st.pack_done.store(0, std::memory_order_relaxed);
      st.items_taken.store(0, std::memory_order_relaxed);
      st.items_done.store(0, std::memory_order_relaxed);
    }
    for (int i = 0; i < n_items; ++i) items[i].store(0, std::memory_order_relaxed);
    if (need_second_buffer) second_buffer = second.fit(std::max(a_buffer_floats(blk), b_buffer_floats(blk)));
  }
};

TeamState& team_state() {
  thread_local TeamState state;
  return state;
}

// Spins until `value` holds at least `target` (acquire). Waits here are short (a packing piece
// or a row block in progress on another thread); after many spins the thread yields, in case the
// one it waits for has lost its core.
void wait_at_least(const std::atomic<int>& value, int target) {
  for (int spins = 0; value.load(std::memory_order_acquire) < target; ++spins) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
    if (spins >= (1 << 14)) {
      std::this_thread::yield();
      spins = 0;
    }
  }
}

// The packing of stage `stage`'s shared operand, by every thread that arrives while pieces are
// left (pack_piece(piece) packs one of n_pieces). The stage's buffer last served stage - 2, so
// packing starts once all `items_before` work items of that stage are finished. Returns once
// every piece is packed.
template <class PackPiece>
void pack_stage(TeamState& state, int stage, int n_pieces, int items_before, PackPiece pack_piece) {
  StageProgress& progress = state.stages[stage];
  if (progress.pack_taken.load(std::memory_order_relaxed) < n_pieces) {
    if (stage >= 2) wait_at_least(state.stages[stage - 2].items_done, items_before);
    for (int piece = progress.pack_taken.fetch_add(1, std::memory_order_relaxed); piece < n_pieces;
         piece = progress.pack_taken.fetch_add(1, std::memory_order_relaxed)) {
      pack_piece(piece);
      progress.pack_done.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  wait_at_least(progress.pack_done, n_pieces);
}

// Parts per row block in the blocked order's last block of op(B).
constexpr int kTailSplit = 4;

// op(B) panels per packing piece: small enough that a thread waiting for the pack of the next
// block waits at most about one piece (48 KB of packed op(B) per 384-step slice).
constexpr int kPackPiecePanels = 8;

// The blocked order on a team of any size (1 included), following `plan`. The KC x NC blocks
// of op(B) go in order (columns jc outer, slices pc inner); each is packed into one of two
// shared buffers in pieces, then its MC-row blocks of C are multiplied, each packing its op(A)
// block into the thread's own buffer. Threads take pieces and row blocks from counters, with no
// barriers: a thread out of row blocks in block b packs pieces of block b + 1 while the others
// finish b.
// It waits only where the data requires it:
//   - before multiplying block b, until all of b's pieces are packed;
//   - before a row block of b, until the same row block of b - 1 is finished (C accumulates
//     over the slices of K);
//   - before packing block b + 2 into b's buffer, until every row block of b is finished.
// Two barriers per block instead would leave one of two threads idle for about half a row
// block per block.
template <class P>
void team_blocked(const Gemm& g, const BlockedPlan& plan, TeamState& state, typename P::Elem* const shared_b[2]) {
  using Elem = typename P::Elem;
  PackBuffers& own = thread_buffers(g.blk);
  const auto [nc_block, kc_block, mc_block, m_blocks, n_slices, n_blocks] = plan;
  for (int blk = 0; blk < n_blocks; ++blk) {
    const int jc = blk / n_slices * nc_block, nc = std::min(nc_block, g.N - jc);
    const Slice sl = g.slice(blk % n_slices, kc_block);
    const int steps = Gemm::steps<P>(sl);
    const float alpha = g.slice_alpha(sl), beta = blk % n_slices == 0 ? g.beta : 1.0f;
    const int n_panels = (nc + kNR - 1) / kNR;
    const int n_pieces = (n_panels + kPackPiecePanels - 1) / kPackPiecePanels;
    Elem* bp = shared_b[blk % 2];
    StageProgress& progress = state.stages[blk];
    pack_stage(state, blk, n_pieces, m_blocks, [&](int piece) {
      const int q0 = piece * kPackPiecePanels, q1 = std::min(n_panels, q0 + kPackPiecePanels);
      g.template pack_b<P>(sl, jc + q0 * kNR, std::min(nc, q1 * kNR) - q0 * kNR, bp + q0 * kNR * steps);
    });
    // The last block's row blocks go in kTailSplit parts: no block follows whose packing could
    // fill the wait for the last part in progress elsewhere.
    const int split = blk == n_blocks - 1 ? kTailSplit : 1;
    for (int item = progress.items_taken.fetch_add(1, std::memory_order_relaxed); item < m_blocks * split;
         item = progress.items_taken.fetch_add(1, std::memory_order_relaxed)) {
      const int rb = item / split, part = item % split;
      const int block_rows = std::min(mc_block, g.M - rb * mc_block);
      const int part_rows = ((block_rows + kMR - 1) / kMR + split - 1) / split * kMR;
      const int ic = rb * mc_block + part * part_rows, mc = std::min(part_rows, block_rows - part * part_rows);
      if (mc > 0) {
        wait_at_least(state.items[rb], blk);
        Elem* own_a = reinterpret_cast<Elem*>(own.a);
        g.template pack_a<P>(sl, ic, mc, own_a);
        block_times_block<P>(g, ic, mc, jc, nc, steps, alpha, beta, g.tile_bias(sl, jc), own_a, bp);
      }
      // Split row blocks are in the last block, which nothing waits for.
      if (split == 1) state.items[rb].store(blk + 1, std::memory_order_release);
      progress.items_done.fetch_add(1, std::memory_order_acq_rel);
    }
  }
}

// op(A) row tiles per packing piece of the streaming order (48 rows).
constexpr int kPackPieceTiles = 8;

// The streaming order (up to blk.stream_rows rows) on a team of any size (1 included), in stages of
// KC slices: each slice's op(A) rows are packed into one of two shared buffers in pieces, then
// threads take op(B) panels from a counter (the one after next is taken early, so that its
// source can be prefetched), each packing the panel into its own L1 buffer. As in the blocked
// order there are no barriers; a thread waits before multiplying slice s until its op(A) is
// packed, before a panel of slice s until the same panel of slice s - 1 is finished, and before
// packing slice s + 2 into s's buffer until every panel of s is finished.
// kc_block: slice_kc(g.blk, g.M, g.K), which the caller worked out to size TeamState.
template <class P>
void team_streaming(const Gemm& g, int kc_block, TeamState& state, typename P::Elem* const shared_a[2]) {
  using Elem = typename P::Elem;
  PackBuffers& own = thread_buffers(g.blk);
  const int m_tiles = (g.M + kMR - 1) / kMR, n_panels = (g.N + kNR - 1) / kNR;
  const int n_pieces = (m_tiles + kPackPieceTiles - 1) / kPackPieceTiles;
  const int n_slices = g.slices(kc_block);
  for (int slice = 0; slice < n_slices; ++slice) {
    const Slice sl = g.slice(slice, kc_block);
    const int steps = Gemm::steps<P>(sl);
    const float alpha = g.slice_alpha(sl), beta = slice == 0 ? g.beta : 1.0f;
    Elem* ap = shared_a[slice % 2];
    StageProgress& progress = state.stages[slice];
    pack_stage(state, slice, n_pieces, n_panels, [&](int piece) {
      const int t0 = piece * kPackPieceTiles, t1 = std::min(m_tiles, t0 + kPackPieceTiles);
      g.template pack_a<P>(sl, t0 * kMR, std::min(g.M, t1 * kMR) - t0 * kMR, ap + t0 * kMR * steps);
    });
    int panel = progress.items_taken.fetch_add(1, std::memory_order_relaxed);
    while (panel < n_panels) {
      const int following = progress.items_taken.fetch_add(1, std::memory_order_relaxed);
      const int jr = panel * kNR, nr = std::min(kNR, g.N - jr);
      // The next panel: the one taken, else the first of the next slice.
      PanelPrefetch next;
      if (following < n_panels) {
        next = panel_source(g, sl, following * kNR);
      } else if (slice + 1 < n_slices) {
        next = panel_source(g, g.slice(slice + 1, kc_block), 0);
      }
      wait_at_least(state.items[panel], slice);
      Elem* own_b_panel = reinterpret_cast<Elem*>(own.b_panel);
      g.template pack_b<P>(sl, jr, nr, own_b_panel);
      panel_times_slice<P>(g, steps, alpha, beta, g.tile_bias(sl, jr), ap, own_b_panel, jr, nr, next);
      state.items[panel].store(slice + 1, std::memory_order_release);
      progress.items_done.fetch_add(1, std::memory_order_acq_rel);
      panel = following;
    }
  }
}

// C = beta * C (+ bias) (K == 0 or alpha == 0: no product to add); beta == 0 writes zeros.
void scale_c(int M, int N, float beta, float* C, ptrdiff_t ldc, const float* bias) {
  for (int i = 0; i < M; ++i) {
    float* row = C + i * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + N, 0.0f);
    } else if (beta != 1.0f) {
      for (int j = 0; j < N; ++j) row[j] *= beta;
    }
    if (bias) {
      for (int j = 0; j < N; ++j) row[j] += bias[j];
    }
  }
}

// A product whose C is a few tiles (at most kSplitMaxTiles) over a long K, such as the weight
// gradient of a narrow layer over many rows (64 x 64 x 10,000 in a PINN), has too little of C
// to share out among threads and a long chain of K slices on each tile. It goes in parts of K
// instead, each on one thread into a buffer of its own, and C = the parts' sum, added in part
// order, (+ beta * C + bias). The parts depend on the shape alone (at least kSplitMinK values of
// K each, at most kSplitMaxParts), never on the thread count, so one or two threads give the
// same bits.
constexpr int kSplitMaxTiles = 16, kSplitMinK = 4096, kSplitMaxParts = 8;

int split_k_parts(int m_tiles, int n_tiles, int K) {
  if (m_tiles * n_tiles > kSplitMaxTiles) return 1;
  return std::clamp(K / kSplitMinK, 1, kSplitMaxParts);
}

template <class P, class BT>
void gemm_on_panels(const GemmBlocking& blk, int max_threads, bool trans_a, bool trans_b, int M, int N, int K,
                    float alpha, const float* A, int lda, const BT* B, int ldb, float beta, float* C, int ldc,
                    const float* bias, const SecondProduct& second = {}, bool may_split = true);

// The split-K order above: `parts` parts of K (P::kKUnit values per packed element: parts but
// the last hold whole elements), each a product of its own with beta 0 on one thread, into the
// calling thread's buffer of parts x M x N floats (kept from call to call).
template <class P, class BT>
void split_k(const GemmBlocking& blk, int threads, int parts, bool trans_a, bool trans_b, int M, int N, int K,
             float alpha, const float* A, int lda, const BT* B, int ldb, float beta, float* C, int ldc,
             const float* bias) {
  thread_local GrowingBuffer buffer;
  const std::size_t mn = static_cast<std::size_t>(M) * N;
  float* partial = buffer.fit(mn * parts);
  const int unit = P::kKUnit;
  const int part_k = (K / parts + unit - 1) / unit * unit;
  // Steps along K: op(A)'s columns, op(B)'s rows.
  const ptrdiff_t a_step = operand_strides(trans_a, lda).col, b_step = operand_strides(trans_b, ldb).row;
  const auto run_part = [&](int q) {
    const int k0 = q * part_k, kq = q == parts - 1 ? K - k0 : part_k;
    gemm_on_panels<P>(blk, 1, trans_a, trans_b, M, N, kq, alpha, A + k0 * a_step, lda, B + k0 * b_step, ldb, 0.0f,
                      partial + q * mn, N, nullptr, {}, false);
  };
  if (threads > 1) {
#pragma omp parallel for num_threads(std::min(threads, parts)) schedule(static, 1)
    for (int q = 0; q < parts; ++q) run_part(q);
  } else {
    for (int q = 0; q < parts; ++q) run_part(q);
  }
  for (int i = 0; i < M; ++i) {
    float* c = C + static_cast<ptrdiff_t>(i) * ldc;
    const float* p0 = partial + static_cast<std::size_t>(i) * N;
    for (int j = 0; j < N; ++j) {
      float sum = p0[j];
      for (int q = 1; q < parts; ++q) sum += p0[q * mn + j];
      if (beta != 0.0f) sum += beta * c[j];
      if (bias) sum += bias[j];
      c[j] = sum;
    }
  }
}

// The GEMM on panels P (the contract of gemm_packed_bias), op(B) from floats or bf16 bits (BT),
// with a second product (second.K > 0) in the last slice of K, in one of its own, or after.
// max_threads: 0 for the OpenMP thread count. may_split: false for a part of split_k's.
template <class P, class BT>
void gemm_on_panels(const GemmBlocking& blk, int max_threads, bool trans_a, bool trans_b, int M, int N, int K,
                    float alpha, const float* A, int lda, const BT* B, int ldb, float beta, float* C, int ldc,
                    const float* bias, const SecondProduct& second, bool may_split) {
  using Elem = typename P::Elem;
  if (M <= 0 || N <= 0) return;
  // Where the second product has no slice of its own below: the first product, then the second
  // (which adds the bias) as a product of its own.
  const auto one_after_the_other = [&] {
    gemm_on_panels<P>(blk, max_threads, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr, {},
                      may_split);
    gemm_on_panels<P>(blk, max_threads, false, second.trans_b, M, N, second.K, second.alpha, second.A, second.lda,
                      second.B, second.ldb, 1.0f, C, ldc, bias, {}, may_split);
  };
  if (K <= 0 || alpha == 0.0f) {
    if (second.K > 0) return one_after_the_other();
    scale_c(M, N, beta, C, ldc, bias);
    return;
  }
  Gemm g{gemm_problem(trans_a, trans_b, M, N, K, alpha, A, lda, nullptr, ldb, beta, C, ldc, bias), blk};
  if constexpr (std::is_same_v<BT, float>) {
    g.B = B;
  } else {
    static_assert(std::is_same_v<BT, std::uint16_t>, "op(B) is floats or bf16 bits");
    g.b16 = B;
  }
  const int m_tiles = (M + kMR - 1) / kMR, n_tiles = (N + kNR - 1) / kNR;
  int threads = omp_in_parallel() ? 1 : max_threads > 0 ? max_threads : omp_get_max_threads();
  if (const int parts = may_split ? split_k_parts(m_tiles, n_tiles, K) : 1; parts > 1) {
    if (second.K > 0) return one_after_the_other();
    split_k<P>(blk, threads, parts, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
    return;
  }
  threads = std::min(threads, std::max(m_tiles, n_tiles));
  if (static_cast<double>(M) * N * K < kParallelMinWork) threads = 1;
  // Streaming needs a few op(B) panels per thread to share out; otherwise the blocked order
  // shares out row blocks.
  const bool streaming = M <= blk.stream_rows && n_tiles >= 4 * threads;
  // Either order's slices of K (blocked_plan's kc_block is the same).
  const int kc_block = slice_kc(blk, M, K, P::kKUnit);
  const int stream_kc = streaming ? kc_block : 0;
  int second_slices = 0;
  if (second.K > 0) {
    // The second product's values go into the panels of the first's last slice where they fit
    // the packing buffers and share its alpha: then C is not read and written once more for
    // them. Else they get a slice of their own, if they fit one. The buffers hold blk.kc steps
    // of every panel (PackBuffers), and the streaming order's op(A) slice of all rows at most
    // stream_a elements.
    const int m_padded = (M + kMR - 1) / kMR * kMR;
    const int room = streaming ? std::min(blk.kc, blk.stream_a / m_padded) : blk.kc;  // steps
    const int last_kc = K - (K - 1) / kc_block * kc_block;
    g.second_in_last = second.alpha == alpha && P::steps(last_kc) + P::steps(second.K) <= room;
    if (!g.second_in_last && P::steps(second.K) > P::steps(kc_block)) return one_after_the_other();
    second_slices = g.second_in_last ? 0 : 1;
    g.second = second;
    g.a2_row = second.lda, g.a2_col = 1;
    const OperandStrides b2 = operand_strides(second.trans_b, second.ldb);
    g.b2_row = b2.row, g.b2_col = b2.col;
  }
  const BlockedPlan plan = streaming ? BlockedPlan{} : blocked_plan(blk, M, N, K, threads, P::kKUnit, second_slices);
  PackBuffers& mine = thread_buffers(blk);
  TeamState& state = team_state();
  if (streaming) {
    state.reset(blk, g.slices(stream_kc), n_tiles, threads > 1);
  } else {
    state.reset(blk, plan.n_blocks, plan.m_blocks, threads > 1);
  }
  // Alone, one buffer serves every stage: nothing else can still be reading the previous one.
  // The buffers are sized in floats; a panel of Elem takes no more bytes than one of floats.
  static_assert(sizeof(Elem) == sizeof(float));
  Elem* const first = reinterpret_cast<Elem*>(streaming ? mine.a : mine.b);
  Elem* const shared[2] = {first, threads > 1 ? reinterpret_cast<Elem*>(state.second_buffer) : first};
  const auto run = [&] {
    if (streaming) {
      team_streaming<P>(g, stream_kc, state, shared);
    } else {
      team_blocked<P>(g, plan, state, shared);
    }
  };
  // One thread runs here, not in a one-thread parallel region: libgomp allocates a team for
  // each of those.
  if (threads == 1) {
    run();
    return;
  }
#pragma omp parallel num_threads(threads)
  run();
}

}  // namespace

void gemm_packed(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc) {
  if (M == 1 && !trans_a && trans_b && K > 0) return gemv_rows(N, K, alpha, A, B, ldb, beta, C, nullptr);
  if (gemm_skinny(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr)) return;
  gemm_on_panels<Fp32Panels>(current_gemm_blocking(), 0, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                             nullptr);
}

void gemm_packed_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                      const float* B, int ldb, float beta, float* C, int ldc, const float* bias) {
  if (M == 1 && !trans_a && trans_b && K > 0) return gemv_rows(N, K, alpha, A, B, ldb, beta, C, bias);
  if (gemm_skinny(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias)) return;
  gemm_on_panels<Fp32Panels>(current_gemm_blocking(), 0, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                             bias);
}

void gemm_packed_with(const GemmBlocking& blocking, int max_threads, bool trans_a, bool trans_b, int M, int N, int K,
                      float alpha, const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
                      const float* bias) {
  gemm_on_panels<Fp32Panels>(blocking, max_threads, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                             bias, {});
}

void gemm_packed_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                      const float* B, int ldb, float beta, float* C, int ldc, const float* bias) {
  gemm_on_panels<Bf16Panels>(Bf16Panels::blocking(current_gemm_blocking()), 0, trans_a, trans_b, M, N, K, alpha, A, lda,
                             B, ldb, beta, C, ldc, bias);
}

namespace {

// gemm_on_panels on bf16 or fp32 panels, with the current blocking and thread count.
template <class BT>
void on_chosen_panels(bool bf16_products, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                      int lda, const BT* B, int ldb, float beta, float* C, int ldc, const float* bias,
                      const SecondProduct& second) {
  if (bf16_products) {
    gemm_on_panels<Bf16Panels>(Bf16Panels::blocking(current_gemm_blocking()), 0, trans_a, trans_b, M, N, K, alpha, A,
                               lda, B, ldb, beta, C, ldc, bias, second);
  } else {
    gemm_on_panels<Fp32Panels>(current_gemm_blocking(), 0, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                               ldc, bias, second);
  }
}

}  // namespace

void gemm_packed_b_bf16(bool bf16_products, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const float* A, int lda, const std::uint16_t* B, int ldb, float beta, float* C, int ldc,
                        const float* bias, const SecondProduct& second) {
  on_chosen_panels(bf16_products, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, second);
}

void gemm_packed_with_second(bool bf16_products, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                             const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
                             const float* bias, const SecondProduct& second) {
  on_chosen_panels(bf16_products, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, second);
}

const char* gemm_packed_kernel_name() { return Isa::kName; }

const char* gemm_packed_bf16_kernel_name() {
  static const std::string name = kHaveBf16DotProduct
                                      ? std::string("avx512_bf16 14x32 (vdpbf16ps)")
                                      : std::string(Isa::kName) + " on operands rounded to bf16 (no AVX512_BF16)";
  return name.c_str();
}

}  // namespace llmcc::cpu
