// mean_pool: fast kernel vs reference (Kernel), reference backward vs finite differences in
// double (Grad), front-end validation and pullback contract (Api).
#include "llmcc/ops/mean_pool.h"

#include "kernels/cpu/mean_pool.h"
#include "kernels/ref/mean_pool.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

TEST(MeanPoolKernel, ForwardAndBackwardMatchReference) {
  test::for_each_thread_count([](int) {
    for (int B : {1, 3, 7}) {
      for (int T : {1, 3, 64, 65}) {
        for (int C : test::awkward_sizes()) {
          SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C));
          const std::size_t nx = std::size_t(B) * T * C, no = std::size_t(B) * C;
          const auto x = test::random_vector<float>(nx, 1);      // (B, T, C)
          const auto d_out = test::random_vector<float>(no, 2);  // (B, C)
          std::vector<float> out(no), out_ref(no);               // (B, C)
          cpu::mean_pool_forward(out.data(), x.data(), B, T, C);
          ref::mean_pool_forward(out_ref.data(), x.data(), B, T, C);
          EXPECT_TRUE(all_close("out", out, out_ref, 1e-6, 1e-5));  // summation order differs

          auto d_x = test::random_vector<float>(nx, 3), d_x_ref = d_x;  // (B, T, C), pre-filled
          cpu::mean_pool_backward(d_x.data(), d_out.data(), B, T, C, false);
          ref::mean_pool_backward(d_x_ref.data(), d_out.data(), B, T, C);
          EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, 1e-7, 1e-6));

          std::vector<float> d_x_w(nx, 5.0f), d_x_zero(nx, 0.0f);  // overwrite ignores what is there
          cpu::mean_pool_backward(d_x_w.data(), d_out.data(), B, T, C, true);
          ref::mean_pool_backward(d_x_zero.data(), d_out.data(), B, T, C);
          EXPECT_TRUE(all_close("d_x (overwrite)", d_x_w, d_x_zero, 1e-7, 1e-6));
        }
      }
    }
  });
}

TEST(MeanPoolGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int B = 2, T = 5, C = 3;
  auto x = test::random_vector<double>(B * T * C, 11);    // (B, T, C)
  const auto w = test::random_vector<double>(B * C, 12);  // (B, C) adjoint of out
  auto loss = [&] {
    std::vector<double> out(B * C);
    ref::mean_pool_forward(out.data(), x.data(), B, T, C);
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_x(B * T * C, 0.0);
  ref::mean_pool_backward(d_x.data(), w.data(), B, T, C);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}}));
}

TEST(MeanPoolApi, ForwardAndPullbackAccumulateTakePendingZerosAndSkipNull) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  Tensor x = test::tensor_from(arena, {2, 3, 4}, test::random_vector<float>(24, 1));  // (2, 3, 4)
  Tensor out = mean_pool(x);                                                          // (2, 4)
  ASSERT_EQ(out.shape(), (Shape{2, 4}));
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 4; ++c) {
      const float* p = x.f32() + b * 12 + c;
      EXPECT_FLOAT_EQ(out.f32()[b * 4 + c], (p[0] + p[4] + p[8]) / 3.0f);
    }
  Tensor d_out = test::tensor_from(arena, {2, 4}, test::random_vector<float>(8, 2));
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    test::KernelModeScope m(mode);
    Tensor d_x = test::tensor_from(arena, {2, 3, 4}, std::vector<float>(24, 1.0f));
    mean_pool_pullback(x, out, d_out, &d_x);  // accumulates
    Tensor d_p = test::tensor_from(arena, {2, 3, 4}, std::vector<float>(24, 9.0f));
    d_p.mark_zero_pending();  // reads as zero: written, not added to
    mean_pool_pullback(x, out, d_out, &d_p);
    for (int i = 0; i < 24; ++i) {
      const float g = d_out.f32()[(i / 12) * 4 + i % 4] / 3.0f;
      EXPECT_FLOAT_EQ(d_x.f32()[i], 1.0f + g) << i;
      EXPECT_FLOAT_EQ(d_p.f32()[i], g) << i;
    }
  }
  mean_pool_pullback(x, out, d_out, nullptr);  // inactive: nothing to do
}

TEST(MeanPoolApi, RejectsBadArguments) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({2, 3, 4}, "x");
  EXPECT_TRUE(test::throws_error([&] { (void)mean_pool(x); }, {"[mean_pool]", "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  EXPECT_TRUE(test::throws_error([&] { (void)mean_pool(arena.zeros({6, 4}, "x2")); },
                                 {"[mean_pool]", "x has shape (6, 4), expected 3 dims (B, T, C)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)mean_pool(Tensor()); }, {"[mean_pool]", "no storage"}));
  Tensor out = mean_pool(x), wrong = arena.zeros({2, 5}, "w");
  EXPECT_TRUE(test::throws_error([&] { mean_pool_pullback(x, out, wrong, nullptr); },
                                 {"[mean_pool]", "d_out has shape (2, 5): dim 1 is 5, expected 4 (C of x)"}));
  EXPECT_TRUE(test::throws_error([&] { mean_pool_pullback(x, out, out, &wrong); },
                                 {"[mean_pool]", "d_x has shape (2, 5), expected (2, 3, 4)"}));
}

}  // namespace
}  // namespace llmcc
