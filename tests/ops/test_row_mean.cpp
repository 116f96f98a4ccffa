// row_mean: fast kernel vs reference (Kernel), reference backward vs finite differences in
// double (Grad), front-end validation and pullback contract (Api).
#include "llmcc/ops/row_mean.h"

#include "kernels/cpu/row_mean.h"
#include "kernels/ref/row_mean.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

TEST(RowMeanKernel, ForwardAndBackwardMatchReference) {
  test::for_each_thread_count([](int) {
    for (int R : {1, 3, 7, 600}) {
      for (int C : test::awkward_sizes()) {
        SCOPED_TRACE("R=" + std::to_string(R) + " C=" + std::to_string(C));
        const std::size_t nx = std::size_t(R) * C;
        const auto x = test::random_vector<float>(nx, 1);     // (R, C)
        const auto d_out = test::random_vector<float>(R, 2);  // (R)
        std::vector<float> out(R), out_ref(R);                // (R)
        cpu::row_mean_forward(out.data(), x.data(), R, C);
        ref::row_mean_forward(out_ref.data(), x.data(), R, C);
        EXPECT_TRUE(all_close("out", out, out_ref, 1e-6, 1e-5));  // summation order differs

        auto d_x = test::random_vector<float>(nx, 3), d_x_ref = d_x;  // (R, C), pre-filled
        cpu::row_mean_backward(d_x.data(), d_out.data(), R, C, false);
        ref::row_mean_backward(d_x_ref.data(), d_out.data(), R, C);
        EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, 1e-7, 1e-6));

        std::vector<float> d_x_w(nx, 5.0f), d_x_zero(nx, 0.0f);  // overwrite ignores what is there
        cpu::row_mean_backward(d_x_w.data(), d_out.data(), R, C, true);
        ref::row_mean_backward(d_x_zero.data(), d_out.data(), R, C);
        EXPECT_TRUE(all_close("d_x (overwrite)", d_x_w, d_x_zero, 1e-7, 1e-6));
      }
    }
  });
}

TEST(RowMeanKernel, OneAndTwoThreadsGiveTheSameBits) {
  const int R = 700, C = 129;
  const auto x = test::random_vector<float>(std::size_t(R) * C, 4);  // (R, C)
  std::vector<std::vector<float>> out;                               // (R) per thread count
  test::for_each_thread_count([&](int) {
    out.emplace_back(R);
    cpu::row_mean_forward(out.back().data(), x.data(), R, C);
  });
  EXPECT_EQ(out[0], out[1]);
}

TEST(RowMeanGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int R = 4, C = 5;
  auto x = test::random_vector<double>(R * C, 11);    // (R, C)
  const auto w = test::random_vector<double>(R, 12);  // (R) adjoint of out
  auto loss = [&] {
    std::vector<double> out(R);
    ref::row_mean_forward(out.data(), x.data(), R, C);
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_x(R * C, 0.0);
  ref::row_mean_backward(d_x.data(), w.data(), R, C);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}}));
}

TEST(RowMeanApi, OutputIsAColumnOfXForEveryRank) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const std::vector<std::pair<Shape, Shape>> cases = {{Shape{5}, Shape{1}},
                                                      {Shape{3, 5}, Shape{3, 1}},
                                                      {Shape{2, 3, 5}, Shape{2, 3, 1}},
                                                      {Shape{2, 1, 3, 5}, Shape{2, 1, 3, 1}}};
  for (const auto& [in, want] : cases) {
    Tensor x = test::tensor_from(arena, in, test::random_vector<float>(in.numel(), 1));
    Tensor out = row_mean(x);
    ASSERT_EQ(out.shape(), want) << in.str();
    for (std::int64_t r = 0; r < out.numel(); ++r) {
      double s = 0;
      for (int c = 0; c < 5; ++c) s += x.f32()[r * 5 + c];
      EXPECT_NEAR(out.f32()[r], s / 5, 1e-6) << in.str() << " row " << r;
    }
  }
}

TEST(RowMeanApi, PullbackAccumulatesTakesPendingZerosAndSkipsNull) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  Tensor x = test::tensor_from(arena, {2, 3, 4}, test::random_vector<float>(24, 1));  // (2, 3, 4)
  Tensor out = row_mean(x);                                                           // (2, 3, 1)
  Tensor d_out = test::tensor_from(arena, {2, 3, 1}, test::random_vector<float>(6, 2));
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    test::KernelModeScope m(mode);
    Tensor d_x = test::tensor_from(arena, {2, 3, 4}, std::vector<float>(24, 1.0f));
    row_mean_pullback(x, out, d_out, &d_x);  // accumulates
    Tensor d_p = test::tensor_from(arena, {2, 3, 4}, std::vector<float>(24, 9.0f));
    d_p.mark_zero_pending();  // reads as zero: written, not added to
    row_mean_pullback(x, out, d_out, &d_p);
    for (int i = 0; i < 24; ++i) {
      const float g = d_out.f32()[i / 4] / 4.0f;
      EXPECT_FLOAT_EQ(d_x.f32()[i], 1.0f + g) << i;
      EXPECT_FLOAT_EQ(d_p.f32()[i], g) << i;
    }
  }
  row_mean_pullback(x, out, d_out, nullptr);  // inactive: nothing to do
}

TEST(RowMeanApi, RejectsBadArguments) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({2, 3, 4}, "x");
  EXPECT_TRUE(test::throws_error([&] { (void)row_mean(x); }, {"[row_mean]", "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  EXPECT_TRUE(test::throws_error([&] { (void)row_mean(Tensor()); }, {"[row_mean]", "no storage"}));
  EXPECT_TRUE(test::throws_error([&] { (void)row_mean(arena.zeros({2, 0}, "e")); },
                                 {"[row_mean]", "x has shape (2, 0), expected (..., C) with every dim > 0"}));
  Tensor out = row_mean(x), wrong = arena.zeros({2, 4}, "w");
  EXPECT_TRUE(test::throws_error([&] { row_mean_pullback(x, out, wrong, nullptr); },
                                 {"[row_mean]", "d_out has shape (2, 4), expected (2, 3, 1) (x's rows)"}));
  EXPECT_TRUE(test::throws_error([&] { row_mean_pullback(x, out, out, &wrong); },
                                 {"[row_mean]", "d_x has shape (2, 4), expected (2, 3, 4)"}));
}

}  // namespace
}  // namespace llmcc
