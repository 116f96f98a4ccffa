// Learning-rate schedule (nanoGPT semantics) and global-norm gradient clipping.
#include "llmcc/train/schedule.h"

#include <cmath>
#include <numbers>

#include "llmcc/train/grad_clip.h"
#include "test_support.h"

namespace llmcc {
namespace {

TEST(LrSchedule, WarmupCosineThenConstant) {
  const LrSchedule s{.max_lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 4, .max_steps = 12};
  // Warmup: max_lr * (step + 1) / (warmup + 1), never 0.
  EXPECT_FLOAT_EQ(s.lr(0), 1e-3f * 1 / 5);
  EXPECT_FLOAT_EQ(s.lr(3), 1e-3f * 4 / 5);
  // First step after warmup: max_lr; halfway: the mean; max_steps: min_lr.
  EXPECT_FLOAT_EQ(s.lr(4), 1e-3f);
  EXPECT_FLOAT_EQ(s.lr(8), 5.5e-4f);
  EXPECT_FLOAT_EQ(s.lr(6), static_cast<float>(1e-4 + 0.5 * (1 + std::cos(std::numbers::pi / 4)) * 9e-4));
  EXPECT_FLOAT_EQ(s.lr(12), 1e-4f);
  EXPECT_FLOAT_EQ(s.lr(13), 1e-4f);
  EXPECT_FLOAT_EQ(s.lr(1000000), 1e-4f);
  for (std::int64_t step = 4; step < 12; ++step) EXPECT_GT(s.lr(step), s.lr(step + 1)) << step;
}

TEST(LrSchedule, EdgeCasesAndValidation) {
  const LrSchedule no_warmup{.max_lr = 2.0, .min_lr = 0.0, .warmup_steps = 0, .max_steps = 2};
  EXPECT_FLOAT_EQ(no_warmup.lr(0), 2.0f);
  EXPECT_FLOAT_EQ(no_warmup.lr(1), 1.0f);
  EXPECT_FLOAT_EQ(no_warmup.lr(2), 0.0f);
  const LrSchedule only_warmup{.max_lr = 1.0, .min_lr = 0.5, .warmup_steps = 3, .max_steps = 3};
  EXPECT_FLOAT_EQ(only_warmup.lr(2), 0.75f);
  EXPECT_FLOAT_EQ(only_warmup.lr(3), 0.5f);
  const LrSchedule bad{.max_lr = 1.0, .min_lr = 0.1, .warmup_steps = 10, .max_steps = 5};
  EXPECT_TRUE(test::throws_error([&] { (void)bad.lr(0); }, {"[schedule]", "warmup_steps=10 max_steps=5"}));
  const LrSchedule negative{.max_lr = -1.0, .min_lr = 0.1, .warmup_steps = 0, .max_steps = 5};
  EXPECT_TRUE(test::throws_error([&] { negative.validate(); }, {"[schedule]", "max_lr=-1"}));
}

ParameterStore random_grads(std::uint64_t seed) {
  // Sizes that leave alignment padding and span several norm chunks.
  ParameterStore g({{"a", Shape{3, 7}}, {"b", Shape{65}}, {"c", Shape{197, 300}}});
  for (std::size_t i = 0; i < g.count(); ++i) {
    const auto v = test::random_vector<float>(g.shape(i).numel(), seed + i);
    std::copy(v.begin(), v.end(), g.data() + g.offset(i));
  }
  return g;
}

double reference_norm(const ParameterStore& g) {
  double s = 0.0;
  for (std::size_t i = 0; i < g.count(); ++i) {
    const float* p = g.data() + g.offset(i);
    for (std::int64_t k = 0; k < g.shape(i).numel(); ++k) s += double{p[k]} * p[k];
  }
  return std::sqrt(s);
}

TEST(GradClip, NormIsExactAndIndependentOfThreads) {
  ParameterStore g = random_grads(7);
  const double want = reference_norm(g);
  std::vector<double> got;
  test::for_each_thread_count([&](int) { got.push_back(grad_norm(g)); });
  EXPECT_NEAR(got[0], want, 1e-12 * want);
  EXPECT_EQ(got[0], got[1]);  // fixed chunks summed in order
}

TEST(GradClip, ClipsToMaxNormAndReturnsTheNormBefore) {
  ParameterStore g = random_grads(8);
  const double before = reference_norm(g);
  ASSERT_GT(before, 1.0);
  const float first = g.data()[0];
  EXPECT_NEAR(clip_grad_norm(g, 1.0), before, 1e-12 * before);
  EXPECT_NEAR(grad_norm(g), 1.0, 1e-5);
  EXPECT_FLOAT_EQ(g.data()[0], static_cast<float>(first * (1.0 / (before + 1e-6))));
}

TEST(GradClip, NoOpUnderTheMaximum) {
  ParameterStore g = random_grads(9);
  const std::vector<float> copy(g.data(), g.data() + g.size());
  const double norm = clip_grad_norm(g, 1e6);
  EXPECT_NEAR(norm, reference_norm(g), 1e-12 * norm);
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), g.data()));
  EXPECT_TRUE(test::throws_error([&] { clip_grad_norm(g, 0.0); }, {"[grad_clip]", "max_norm"}));
}

TEST(GradClip, ScaleDividesAccumulatedGradients) {
  ParameterStore g = random_grads(10);
  const std::vector<float> copy(g.data(), g.data() + g.size());
  scale_grads(g, 0.25f);
  for (std::size_t i = 0; i < copy.size(); ++i) ASSERT_EQ(g.data()[i], copy[i] * 0.25f) << i;
}

}  // namespace
}  // namespace llmcc
