// The tests' random data (test::random_vector) is the sequence std::uniform_real_distribution
// draws from std::mt19937_64, bit for bit: tolerances and expectations written against it stay
// valid, while its own draw (test::uniform_from_bits) skips the standard library's per-draw
// logarithm.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "test_support.h"

namespace {

std::uint64_t bits_of(double x) {
  std::uint64_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

TEST(RandomVector, DrawsWhatTheStandardDistributionDraws) {
  for (const auto& [lo, hi] :
       {std::pair{-1.0, 1.0}, std::pair{0.0, 1.0}, std::pair{0.5, 2.0}, std::pair{-3.0, -0.25}}) {
    for (std::uint64_t seed : {1, 2, 77, 123456789}) {
      const auto got = llmcc::test::random_vector<double>(20000, seed, lo, hi);
      std::mt19937_64 rng(seed);
      std::uniform_real_distribution<double> dist(lo, hi);
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double want = dist(rng);
        ASSERT_EQ(bits_of(got[i]), bits_of(want))
            << "seed " << seed << " element " << i << " in [" << lo << ", " << hi << ")";
      }
    }
  }
  // The largest outputs of the engine, where the division rounds up to 1 or just below it.
  for (std::uint64_t bits : {~std::uint64_t{0}, ~std::uint64_t{0} - 1023, ~std::uint64_t{0} - 1024,
                             ~std::uint64_t{0} - 2048, std::uint64_t{1} << 63, std::uint64_t{0}, std::uint64_t{1}}) {
    const long double exact = static_cast<long double>(bits) / 18446744073709551616.0L;
    double want = static_cast<double>(exact);
    if (want >= 1.0) want = std::nextafter(1.0, 0.0);
    EXPECT_EQ(bits_of(llmcc::test::uniform_from_bits(bits, 0.0, 1.0)), bits_of(want)) << bits;
    EXPECT_LT(llmcc::test::uniform_from_bits(bits, -1.0, 1.0), 1.0) << bits;
  }
}

}  // namespace
