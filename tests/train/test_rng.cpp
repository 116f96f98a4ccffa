// Rng: the stated SplitMix64 sequence, exact save/restore, and the derived distributions.
#include "llmcc/train/rng.h"

#include <cmath>

#include "test_support.h"

namespace llmcc {
namespace {

TEST(Rng, IsSplitMix64) {
  // SplitMix64 from state 0 (the published reference sequence).
  Rng r(0);
  EXPECT_EQ(r.next_u64(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(r.next_u64(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(r.next_u64(), 0x06C45D188009454Full);
}

TEST(Rng, SaveAndRestoreReproduceTheSequence) {
  Rng r(42);
  for (int i = 0; i < 10; ++i) r.next_u64();
  const std::uint64_t saved = r.state();
  std::vector<double> a;
  for (int i = 0; i < 10; ++i) a.push_back(r.normal() + r.uniform() + double(r.below(7)));
  Rng s(1);
  s.set_state(saved);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a[i], s.normal() + s.uniform() + double(s.below(7)));
}

TEST(Rng, UniformBelowAndNormalHaveTheirDistributions) {
  Rng r(3);
  constexpr int N = 200000;
  double sum = 0.0, sum2 = 0.0;
  float lo = 1.0f, hi = 0.0f;
  for (int i = 0; i < N; ++i) {
    const float u = r.uniform();
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_GE(lo, 0.0f);
  EXPECT_LT(hi, 1.0f);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < N; ++i) counts[r.below(10)]++;
  for (int c : counts) EXPECT_NEAR(c, N / 10, 600);  // ~4.5 sigma
  std::vector<float> x(N + 1);                       // odd length: exercises the tail
  r.fill_normal(x.data(), x.size(), 1.0f, 2.0f);
  for (float v : x) {
    sum += v;
    sum2 += double{v} * v;
  }
  const double mean = sum / x.size(), var = sum2 / x.size() - mean * mean;
  EXPECT_NEAR(mean, 1.0, 0.02);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.02);
  EXPECT_TRUE(test::throws_error([&] { r.below(0); }, {"[rng]", "n > 0"}));
}

}  // namespace
}  // namespace llmcc
