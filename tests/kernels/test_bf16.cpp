// fp32 -> bf16 rounding (kernels/cpu/bf16.h) against a reference written from the definition:
// the nearest bf16 by exact distance, ties to the even one, subnormal inputs as signed zero,
// NaN made quiet, overflow to infinity. Checked on ties, subnormals, NaN, infinities, the
// overflow edge and random bit patterns; the vectorised paths (vcvtneps2bf16 where the CPU has
// AVX512_BF16, the loop the compiler vectorises) against the scalar one.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/bf16.h"

namespace llmcc {
namespace {

// The bf16 nearest to x, from the definition (independent of bf16.h's bit trick).
std::uint16_t reference_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  if (std::isinf(x)) return static_cast<std::uint16_t>(u >> 16);
  if (x == 0.0f || std::fpclassify(x) == FP_SUBNORMAL) return sign;
  // The two bf16 that bracket |x|: its truncation and the next one up in magnitude.
  const std::uint16_t down = static_cast<std::uint16_t>(u >> 16), up = static_cast<std::uint16_t>(down + 1);
  const double lo = std::fabs(static_cast<double>(cpu::bf16_to_float(down)));
  // The bf16 above the largest finite one is infinity: the midpoint is 2^128 - 2^119.
  const double hi =
      (up & 0x7fffu) == 0x7f80u ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(cpu::bf16_to_float(up)));
  const double ax = std::fabs(static_cast<double>(x));
  if (ax - lo < hi - ax) return down;
  if (ax - lo > hi - ax) return up;
  return (down & 1u) ? up : down;
}

float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

std::vector<float> special_values() {
  std::vector<float> v;
  for (std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t bits :
         {0x00000000u, 0x00000001u, 0x00007fffu, 0x00008000u, 0x007fffffu,  // zero, subnormals
          0x00800000u, 0x00808000u, 0x00818000u, 0x0080ffffu,               // smallest normals, ties
          0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u,  // ties at 1: even stays, odd rounds up
          0x3f80ffffu, 0x3fffffffu, 0x3fff8000u, 0x3fff7fffu,               // carries into the exponent
          0x7f7f0000u, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu,               // the overflow edge
          0x7f800000u, 0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu,  // infinity, NaNs
          0x7f810000u, 0x7f80ffffu}) {
      v.push_back(from_bits(bits | sign));
    }
  }
  return v;
}

void expect_bits(const char* what, float x, std::uint16_t got, std::uint16_t want) {
  EXPECT_EQ(got, want) << what << " of 0x" << std::hex << std::bit_cast<std::uint32_t>(x);
}

TEST(Bf16Kernel, ScalarRoundingMatchesTheDefinition) {
  for (float x : special_values()) expect_bits("bf16_bits", x, cpu::bf16_bits(x), reference_bf16(x));
  std::mt19937 rng(7);
  for (int i = 0; i < (1 << 22); ++i) {
    const float x = from_bits(static_cast<std::uint32_t>(rng()));
    const std::uint16_t got = cpu::bf16_bits(x), want = reference_bf16(x);
    if (got != want) {
      expect_bits("bf16_bits", x, got, want);
      break;
    }
  }
  // The rule's named cases, spelled out.
  EXPECT_EQ(cpu::bf16_bits(from_bits(0x3f808000u)), 0x3f80u);  // tie, kept value even: down
  EXPECT_EQ(cpu::bf16_bits(from_bits(0x3f818000u)), 0x3f82u);  // tie, kept value odd: up
  EXPECT_EQ(cpu::bf16_bits(from_bits(0x807fffffu)), 0x8000u);  // subnormal: signed zero
  EXPECT_EQ(cpu::bf16_bits(from_bits(0x7f7fffffu)), 0x7f80u);  // past the largest bf16: infinity
  EXPECT_EQ(cpu::bf16_bits(from_bits(0xff800001u)), 0xffc0u);  // signalling NaN: quiet, sign kept
  EXPECT_EQ(cpu::round_to_bf16(1.0f + 1.0f / 256.0f), 1.0f);
  EXPECT_EQ(cpu::bf16_to_float(0x3f80u), 1.0f);
}

// floats_to_bf16 and round_floats_to_bf16 against bf16_bits on every bf16 value's neighbourhood:
// each of the 65,536 upper halves with lower halves that round down, tie, round up and carry
// (0, 1, 0x7fff, 0x8000, 0x8001, 0xffff) and 58 random ones, in one array of odd length so the
// vector loops' tails run too.
TEST(Bf16Kernel, VectorPathsMatchScalarOnEveryUpperHalf) {
  std::printf("[ note     ] floats_to_bf16 runs on %s\n",
              cpu::kHaveBf16DotProduct
                  ? "vcvtneps2bf16 (AVX512_BF16)"
                  : "the scalar loop: this CPU has no AVX512_BF16, so vcvtneps2bf16 is not tested");
  std::vector<std::uint32_t> lows = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu};
  std::mt19937 rng(11);
  while (lows.size() < 64) lows.push_back(rng() & 0xffffu);
  std::vector<float> x;  // (65536 * 64 + 3)
  for (std::uint32_t high = 0; high < 0x10000u; ++high)
    for (std::uint32_t low : lows) x.push_back(from_bits(high << 16 | low));
  for (float extra : {1.0f, -2.5f, 3.0e38f}) x.push_back(extra);
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<std::uint16_t> out(x.size());  // (n)
  std::vector<float> rounded = x;            // (n)
  cpu::floats_to_bf16(x.data(), out.data(), n);
  cpu::round_floats_to_bf16(rounded.data(), n);
  std::int64_t mismatches = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t want = cpu::bf16_bits(x[i]);
    const std::uint32_t rounded_bits = std::bit_cast<std::uint32_t>(rounded[i]);
    if (out[i] != want || rounded_bits != static_cast<std::uint32_t>(want) << 16) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << "0x" << std::hex << std::bit_cast<std::uint32_t>(x[i]) << ": floats_to_bf16 0x" << out[i]
                      << ", round_floats_to_bf16 0x" << rounded_bits << ", bf16_bits 0x" << want;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace llmcc
