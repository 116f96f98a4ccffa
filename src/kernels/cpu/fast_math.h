// Branch-free float exp and sigmoid for the fast kernels' vectorised loops (silu, gelu, tanh,
// cross-entropy, attention's softmax).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace llmcc::cpu {

// exp(x) in float without a library call, so that `omp simd` loops vectorise (glibc's expf
// only has vector variants under -ffast-math). x = k ln2 + r with |r| <= ln2/2 (ln2 split in
// two so k * kLn2Hi is exact), e^r by a degree-7 Taylor polynomial (truncation < 6e-9
// relative), 2^k written into the exponent bits. x is clamped to [-87, 88] so that 2^k stays
// a normal float: exp(-87) ~ 1.6e-38 stands in for smaller results and exp(88) ~ 1.7e38 for
// larger ones, which is harmless inside 1 / (1 + exp(.)); so exp(-inf) is 1.6e-38 and exp(+inf)
// 1.7e38. A NaN gives NaN: the clamp passes it through (std::max and std::min return their first
// argument when a comparison is false), and nothing converts a float to an integer, which for a
// NaN would be undefined behaviour: k is read from the bits of x * log2(e) + 1.5 * 2^23.
constexpr float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504f;
  constexpr float kLn2Hi = 0.693359375f;     // 355/512: few mantissa bits, k * kLn2Hi exact
  constexpr float kLn2Lo = -2.12194440e-4f;  // ln2 - kLn2Hi
  constexpr float kRound = 12582912.0f;      // 1.5 * 2^23: adding it rounds to an integer
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float t = x * kLog2e + kRound;  // in [2^23, 2^24): k + 1.5 * 2^23, k in the low mantissa bits
  const float k = t - kRound;           // nearest integer to x log2(e), in [-126, 127]
  const float r = (x - k * kLn2Hi) - k * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^k: k + 127 in the exponent field, with k = bits(t) - bits(1.5 * 2^23) (unsigned: for a NaN
  // the bits are arbitrary but p is NaN, and so is the product).
  const std::uint32_t bits = (std::bit_cast<std::uint32_t>(t) - std::bit_cast<std::uint32_t>(kRound) + 127u) << 23;
  return p * std::bit_cast<float>(bits);
}

// 1 / (1 + e) with e = fast_exp(-x) (passed in, for callers that need e too); no cancellation
// for either sign of x. Below x = -88, where fast_exp clamps, it is 0: the true value is under
// 6e-39, and 1 / (1 + exp(88)) would be a denormal. Returning 0 there also keeps denormals out
// of the vector code: GCC if-converts the clamp and folds the clamped lanes' result into a
// constant; were that constant a denormal, every vector multiply by it before the lanes are
// blended apart would take a microcode assist.
inline float sigmoid_from_exp(float x, float e) { return x < -88.0f ? 0.0f : 1.0f / (1.0f + e); }

// 1 / (1 + exp(-x)), 0 below x = -88 (sigmoid_from_exp).
inline float fast_sigmoid(float x) { return sigmoid_from_exp(x, fast_exp(-x)); }

}  // namespace llmcc::cpu
