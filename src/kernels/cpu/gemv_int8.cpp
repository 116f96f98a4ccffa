// y (1, N) = x (1, K) . W^T with W as int8 blocks (kernels/cpu/gemv.h, gemv_rows_int8).
//
// x is rounded to int8 blocks like W, so a block's product is a dot product of 32 int8 pairs,
// exact in int32: with AVX2, 32 pairs are two instructions (vpmaddubsw then vpmaddwd), with VNNI
// one (vpdpbusd), where widening W to fp32 first took four per 16 weights and left decoding bound
// by the widening rather than by memory. The unsigned-by-signed products take |x| and W with x's
// sign (vpsignb), as no 8-bit product of two signed operands exists. Each block's eight int32
// lanes are converted to fp32 and accumulated with the block's scale product into eight fp32
// lanes per row, summed across lanes once at the row's end.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/cpu/gemv.h"
#include "kernels/cpu/int8_rows.h"
#include "kernels/cpu/parallel.h"

namespace llmcc::cpu {

namespace {

// Products below this many multiply-adds run on the calling thread (as gemv_rows).
constexpr std::int64_t kParallelWork = 1 << 16;

// Rows per group: four rows share each block of x (its load and absolute value) and give four
// independent accumulators.
constexpr int kRows = 4;

// The exact integer dot product of n int8 pairs.
inline std::int32_t dot_int8(const std::int8_t* a, const std::int8_t* b, int n) {
  std::int32_t s = 0;
  for (int i = 0; i < n; ++i) s += std::int32_t{a[i]} * std::int32_t{b[i]};
  return s;
}

#if defined(__AVX2__)
// How far ahead of the bytes being read the next ones are requested. The rows are read four at a
// time, each a short stream (a row is K bytes: 960 for a 360M model), which the hardware
// prefetchers follow too late to keep memory busy; requesting the bytes one 4 KiB page ahead of
// the reads brings bench_gemv's from-memory cases to the machine's read bandwidth.
constexpr std::int64_t kPrefetchAhead = 4096;

static_assert(kInt8Block == 32, "one block is one 256-bit register of int8");

// Eight int32 lanes summing to the dot product of the 32 int8 pairs x . w, given ax = |x|.
inline __m256i dot_block(__m256i ax, __m256i x, __m256i w) {
  const __m256i sw = _mm256_sign_epi8(w, x);  // w with x's sign: ax * sw = x * w per byte
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sw);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ax, sw);
#else
  // Pairs of products into int16 (at most 2 * 127 * 127 = 32258: no saturation), then into int32.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sw), _mm256_set1_epi16(1));
#endif
}

inline float sum_lanes(__m256 v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}
#endif

// Rows [j, j + R) of y.
template <int R>
void rows_int8(std::int64_t j, int K, const std::int8_t* xq, const float* xd, const std::int8_t* W, const float* scales,
               float* y, const float* bias) {
  const std::int64_t nb = int8_blocks(K), full = K / kInt8Block;
  float dot[R];
#if defined(__AVX2__)
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  // The R rows are one contiguous run of R * K bytes, read block by block across the rows; request
  // the bytes kPrefetchAhead further along it at the pace this run is read (two 64-byte lines per
  // four 32-byte blocks). Requests past the matrix's end are harmless: a prefetch never faults.
  const char* run = reinterpret_cast<const char*>(W + j * K);
  for (std::int64_t b = 0; b < full; ++b) {
    for (int r = 0; r < R; r += 2) _mm_prefetch(run + kPrefetchAhead + (b * R + r) * kInt8Block, _MM_HINT_T0);
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * kInt8Block));
    const __m256i ax = _mm256_sign_epi8(x, x);
    for (int r = 0; r < R; ++r) {
      const std::int8_t* w = W + (j + r) * K + b * kInt8Block;  // (32)
      const __m256i d = dot_block(ax, x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
      const __m256 s = _mm256_set1_ps(xd[b] * scales[(j + r) * nb + b]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), s, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) dot[r] = sum_lanes(acc[r]);
#else
  for (int r = 0; r < R; ++r) {
    dot[r] = 0.0f;
    for (std::int64_t b = 0; b < full; ++b)
      dot[r] += static_cast<float>(dot_int8(xq + b * kInt8Block, W + (j + r) * K + b * kInt8Block, kInt8Block)) *
                (xd[b] * scales[(j + r) * nb + b]);
  }
#endif
  if (full < nb) {  // the row's last, shorter block
    const int n = K - static_cast<int>(full * kInt8Block);
    for (int r = 0; r < R; ++r)
      dot[r] += static_cast<float>(dot_int8(xq + full * kInt8Block, W + (j + r) * K + full * kInt8Block, n)) *
                (xd[full] * scales[(j + r) * nb + full]);
  }
  for (int r = 0; r < R; ++r) y[j + r] = dot[r] + (bias != nullptr ? bias[j + r] : 0.0f);
}

}  // namespace

const char* int8_dot_path() {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return "avx512-vnni";
#elif defined(__AVXVNNI__)
  return "avx-vnni";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "portable";
#endif
}

void gemv_rows_int8(int N, int K, const float* x, const std::int8_t* W, const float* scales, float* y,
                    const float* bias) {
  // x's int8 blocks, on the calling thread (K values: little next to N * K). The buffers grow to
  // the largest K once and are reused after.
  thread_local std::vector<std::int8_t> xq_buffer;
  thread_local std::vector<float> xd_buffer;
  if (xq_buffer.size() < static_cast<std::size_t>(K)) xq_buffer.resize(static_cast<std::size_t>(K));
  if (xd_buffer.size() < static_cast<std::size_t>(int8_blocks(K)))
    xd_buffer.resize(static_cast<std::size_t>(int8_blocks(K)));
  std::int8_t* xq = xq_buffer.data();  // (K)
  float* xd = xd_buffer.data();        // (int8_blocks(K))
  quantize_rows_int8(x, 1, K, xq, xd);
  // Groups of kRows on ranges aligned to kRows: a row's code path, and with it its sum's order,
  // depends on its index alone, whatever the thread count.
  parallel_for(
      N, static_cast<std::int64_t>(N) * K >= kParallelWork,
      [&](std::int64_t begin, std::int64_t end) {
        std::int64_t j = begin;
        for (; j + kRows <= end; j += kRows) rows_int8<kRows>(j, K, xq, xd, W, scales, y, bias);
        for (; j < end; ++j) rows_int8<1>(j, K, xq, xd, W, scales, y, bias);
      },
      kRows);
}

}  // namespace llmcc::cpu
