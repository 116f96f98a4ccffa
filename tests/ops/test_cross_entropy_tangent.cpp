// cross_entropy's tangent (forward mode): the fast kernels against the reference in double, the
// reference against central differences of the loss (the tangent) and of the tangent (its
// pullback), in double, and the front end.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/ref/cross_entropy.h"
#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/runtime.h"
#include "test_support.h"

namespace llmcc {
namespace {

std::vector<float> draw(std::size_t n, unsigned seed, float scale = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Targets in [0, V) with every fifth row ignored (-1).
std::vector<std::int32_t> targets_for(std::int64_t N, std::int64_t V) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) t[n] = n % 5 == 4 ? -1 : static_cast<std::int32_t>((n * 7 + 1) % V);
  return t;
}

TEST(CrossEntropyTangentKernel, ForwardAndBackwardMatchDoubleReference) {
  test::for_each_thread_count([](int) {
    for (const auto& [N, V, Vp] :
         std::vector<std::array<std::int64_t, 3>>{{1, 1, 1}, {5, 7, 9}, {33, 65, 65}, {64, 1000, 1024}}) {
      SCOPED_TRACE("N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp));
      const auto n = static_cast<std::size_t>(N * Vp);
      const auto z = draw(n, 1), t = draw(n, 2);
      const auto tg = targets_for(N, V);
      std::int64_t count = 0;
      const double want =
          ref::cross_entropy_tangent_forward(&count, widen(z).data(), widen(t).data(), tg.data(), N, V, Vp, -1);
      std::vector<double> terms(static_cast<std::size_t>(N));
      EXPECT_NEAR(cpu::cross_entropy_tangent_forward(terms.data(), z.data(), t.data(), tg.data(), N, V, Vp, -1), want,
                  1e-5 * (1 + std::fabs(want)));
      for (int mask = 1; mask < 4; ++mask) {
        for (const bool overwrite : {false, true}) {
          std::vector<float> dl(n, overwrite ? 9.0f : 0.5f), dt(n, overwrite ? 9.0f : 0.5f);
          std::vector<double> rl(n, overwrite ? 0.0 : 0.5), rt(n, overwrite ? 0.0 : 0.5);
          cpu::cross_entropy_tangent_backward(mask & 1 ? dl.data() : nullptr, mask & 2 ? dt.data() : nullptr, z.data(),
                                              t.data(), tg.data(), 1.5f, N, V, Vp, -1, overwrite, overwrite);
          ref::cross_entropy_tangent_backward(mask & 1 ? rl.data() : nullptr, mask & 2 ? rt.data() : nullptr,
                                              widen(z).data(), widen(t).data(), tg.data(), 1.5, N, V, Vp, -1);
          for (std::size_t i = 0; i < n; ++i) {
            if (mask & 1) {
              ASSERT_NEAR(dl[i], rl[i], 1e-6 + 1e-5 * std::fabs(rl[i])) << "d_logits " << i;
            }
            if (mask & 2) {
              ASSERT_NEAR(dt[i], rt[i], 1e-6 + 1e-5 * std::fabs(rt[i])) << "d_tangent " << i;
            }
          }
        }
      }
    }
  });
}

TEST(CrossEntropyTangentGrad, ReferenceMatchesFiniteDifferences) {
  const std::int64_t N = 4, V = 5, Vp = 6;
  const auto n = static_cast<std::size_t>(N * Vp);
  auto z = widen(draw(n, 11)), t = widen(draw(n, 12));
  const auto tg = targets_for(N, V);
  std::int64_t count = 0;
  std::vector<double> lse(static_cast<std::size_t>(N));
  auto loss = [&] { return ref::cross_entropy_forward(lse.data(), &count, z.data(), tg.data(), N, V, Vp, -1); };
  auto tangent = [&] {
    return ref::cross_entropy_tangent_forward(&count, z.data(), t.data(), tg.data(), N, V, Vp, -1);
  };
  // The tangent is the directional derivative of the loss along t.
  const double h = 1e-5;
  std::vector<double> z0 = z;
  for (std::size_t i = 0; i < n; ++i) z[i] = z0[i] + h * t[i];
  const double up = loss();
  for (std::size_t i = 0; i < n; ++i) z[i] = z0[i] - h * t[i];
  const double down = loss();
  z = z0;
  EXPECT_NEAR(tangent(), (up - down) / (2 * h), 1e-8);
  // Its pullback against differences of the tangent, for logits and tangent.
  std::vector<double> dz(n, 0.0), dt(n, 0.0);
  ref::cross_entropy_tangent_backward(dz.data(), dt.data(), z.data(), t.data(), tg.data(), 0.7 / 4.0, N, V, Vp, -1);
  for (auto* in : {&z, &t}) {
    const std::vector<double>& d = in == &z ? dz : dt;
    for (std::size_t i = 0; i < n; ++i) {
      const double saved = (*in)[i];
      (*in)[i] = saved + h;
      const double a = tangent();
      (*in)[i] = saved - h;
      const double b = tangent();
      (*in)[i] = saved;
      EXPECT_NEAR(d[i], 0.7 * (a - b) / (2 * h), 1e-8) << (in == &z ? "d_logits " : "d_tangent ") << i;
    }
  }
}

TEST(CrossEntropyTangentApi, AccumulatesTakesPendingZerosAndRejectsBadArguments) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  std::vector<std::int32_t> ids = {1, -1, 0, 2};
  const Tokens targets(ids.data(), 2, 2);
  Tensor z = test::tensor_from(arena, {2, 2, 4}, draw(16, 1));  // (B, T, Vp), V = 3
  Tensor t = test::tensor_from(arena, {2, 2, 4}, draw(16, 2));
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    test::KernelModeScope m(mode);
    const float value = cross_entropy_tangent(z, targets, 3, -1, t);
    Tensor dl = test::tensor_from(arena, {2, 2, 4}, std::vector<float>(16, 1.0f));
    Tensor dp = test::tensor_from(arena, {2, 2, 4}, std::vector<float>(16, 9.0f));
    dp.mark_zero_pending();
    cross_entropy_tangent_pullback(z, targets, 3, -1, t, value, 2.0f, &dl, &dp);
    for (int i = 0; i < 16; ++i) {
      const bool untouched = i / 4 == 1 || i % 4 == 3;  // the ignored row, the padded column
      if (untouched) {
        EXPECT_EQ(dl.f32()[i], 1.0f) << i;
        EXPECT_EQ(dp.f32()[i], 0.0f) << i;
      }
    }
    // d_tangent is the loss's gradient: 2 / 3 (p - onehot) on the rows that count.
    float row_sum = 0.0f;
    for (int v = 0; v < 3; ++v) row_sum += dp.f32()[v];
    EXPECT_NEAR(row_sum, 0.0f, 1e-6f);
    cross_entropy_tangent_pullback(z, targets, 3, -1, t, value, 2.0f, nullptr, nullptr);
  }
  Tensor wrong = arena.zeros({2, 2, 5}, "w");
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy_tangent(z, targets, 3, -1, wrong); },
                                 {"[cross_entropy]", "tangent", "(2, 2, 5)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)cross_entropy_tangent(z, targets, 5, -1, t); },
                                 {"[cross_entropy]", "vocab_size is 5"}));
  EXPECT_TRUE(
      test::throws_error([&] { cross_entropy_tangent_pullback(z, targets, 3, -1, t, 0.0f, 1.0f, &wrong, nullptr); },
                         {"[cross_entropy]", "d_logits has shape (2, 2, 5)"}));
}

}  // namespace
}  // namespace llmcc
