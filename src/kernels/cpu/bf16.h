// bfloat16: the upper 16 bits of an IEEE float (sign, 8 exponent bits, 7 mantissa bits), the
// operand type of the bf16 GEMM. One rounding rule everywhere, the one AVX512_BF16's
// vcvtneps2bf16 applies, so a product is the same whichever path converted its operands:
//   - round to nearest, ties to even;
//   - subnormal inputs count as zero (sign kept): the instruction treats them so;
//   - NaN stays NaN, made quiet (bit 6 of the bf16 set), with its sign and top payload bits;
//   - values that round past the largest finite bf16 become infinity.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace llmcc::cpu {

// Whether this build runs bf16 products on vdpbf16ps (compiled for a CPU with AVX512_BF16);
// otherwise the bf16 GEMM rounds its operands to bf16 and multiplies them with the fp32 kernel.
constexpr bool kHaveBf16DotProduct =
#if defined(__AVX512BF16__)
    true;
#else
    false;
#endif

// The bf16 nearest to x (the rule above), as its 16 bits.
inline std::uint16_t bf16_bits(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN
  if (magnitude < 0x00800000u) return static_cast<std::uint16_t>((u >> 16) & 0x8000u);  // zero, subnormal
  // Adding 0x7fff plus the lowest kept bit carries into the kept bits exactly when the dropped
  // half is above one half, or equal to it with the kept value odd; an overflow carries into the
  // exponent and yields infinity.
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The float whose upper bits are `bits` (exact: every bf16 is a float).
inline float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

// x rounded to bf16, kept as a float.
inline float round_to_bf16(float x) { return bf16_to_float(bf16_bits(x)); }

// out[i] = bf16_bits(x[i]) for i < n.
inline void floats_to_bf16(const float* x, std::uint16_t* out, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX512BF16__)
  for (; i + 16 <= n; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), std::bit_cast<__m256i>(h));
  }
#endif
  for (; i < n; ++i) out[i] = bf16_bits(x[i]);
}

// out[i] = the float of bf16 bits[i] for i < n (exact). A plain element-wise loop the compiler
// vectorises at any width.
inline void bf16_to_floats(const std::uint16_t* bits, float* out, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(bits[i]);
}

// x[i] = round_to_bf16(x[i]) for i < n. A loop of integer operations the compiler vectorises.
inline void round_floats_to_bf16(float* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
}

#if defined(__AVX512BF16__)
// Pairs of bf16 as vdpbf16ps and tdpbf16ps read them: out[i] = bf16(lo[i]) | bf16(hi[i]) << 16
// for the 16 lanes, the even k in the low half.
inline __m512i bf16_pairs(__m512 lo, __m512 hi) {
  // vcvtne2ps2bf16 puts lo's 16 values in words 0-15 and hi's in 16-31; the permutation
  // interleaves them: word 2i from lo[i], word 2i + 1 from hi[i].
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}
#endif

}  // namespace llmcc::cpu
