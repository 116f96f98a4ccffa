// scale: fast kernel vs reference (Kernel), reference backward vs finite differences for x and
// s (Grad), front-end validation and pullback contract (Api).
#include "llmcc/ops/scale.h"

#include "kernels/cpu/scale.h"
#include "kernels/ref/scale.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

TEST(ScaleKernel, ForwardAndBackwardMatchReference) {
  const float s = -0.37f;
  test::for_each_thread_count([&](int) {
    for (int n : test::awkward_sizes()) {
      for (int n2 : {n, n * 197 + 5}) {  // also a size large enough to go parallel
        SCOPED_TRACE("n=" + std::to_string(n2));
        const auto x = test::random_vector<float>(n2, 1), d_out = test::random_vector<float>(n2, 2);
        std::vector<float> out(n2), out_ref(n2);  // (n2)
        cpu::scale_forward(out.data(), x.data(), s, n2);
        ref::scale_forward(out_ref.data(), x.data(), s, n2);
        EXPECT_TRUE(all_close("out", out, out_ref, 0.0, 0.0));

        auto d_x = test::random_vector<float>(n2, 3), d_x_ref = d_x;  // (n2), pre-filled
        float d_s = 0.25f, d_s_ref = 0.25f;                           // pre-filled too
        cpu::scale_backward(d_x.data(), &d_s, x.data(), s, d_out.data(), n2);
        ref::scale_backward(d_x_ref.data(), &d_s_ref, x.data(), s, d_out.data(), n2);
        EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, 1e-7, 1e-6));  // FMA may differ
        // Both sum in double; only the summation order differs.
        EXPECT_TRUE(all_close("d_s", &d_s, &d_s_ref, 1, 1e-6, 1e-6));
      }
    }
  });
}

TEST(ScaleKernel, ScalarAdjointIsSummedInDouble) {
  // 151,301 terms of 0.1f: a float accumulator (even 16 lanes wide) drifts by ~1e-5 relative;
  // a double one ends within the final rounding to float of the exact sum.
  test::for_each_thread_count([](int) {
    const int n = 768 * 197 + 5;
    const std::vector<float> x(n, 1.0f), d_out(n, 0.1f);  // (n)
    float d_s = 0.0f;
    cpu::scale_backward(nullptr, &d_s, x.data(), 2.0f, d_out.data(), n);
    const double exact = static_cast<double>(0.1f) * n;
    EXPECT_TRUE(all_close("d_s", &d_s, &exact, 1, 0.0, 1e-7));
  });
}

TEST(ScaleGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int n = 37;
  auto x = test::random_vector<double>(n, 11);        // (n)
  std::vector<double> s = {-1.7};                     // (1) the scalar, as fd_check wants a vector
  const auto w = test::random_vector<double>(n, 13);  // (n) adjoint of out
  auto loss = [&] {
    std::vector<double> out(n);  // (n)
    ref::scale_forward(out.data(), x.data(), s[0], n);
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_x(n, 0.0), d_s(1, 0.0);  // (n), (1)
  ref::scale_backward(d_x.data(), d_s.data(), x.data(), s[0], w.data(), n);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}, {"s", &s, &d_s}}));
}

// Sets the kernel mode for a scope and restores the previous one.
TEST(ScaleApi, OperatorsAndPullbackAccumulateAndSkipNulls) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Shape s{2, 3, 5};
  Tensor x = test::tensor_from(arena, s, test::random_vector<float>(30, 1));  // (2, 3, 5)
  Tensor left = 3.0f * x, right = x * 3.0f, named = scale(x, 3.0f);           // (2, 3, 5) each
  ASSERT_EQ(left.shape(), s);
  ASSERT_EQ(right.shape(), s);
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(named.f32()[i], 3.0f * x.f32()[i]) << i;
    EXPECT_EQ(left.f32()[i], named.f32()[i]) << i;
    EXPECT_EQ(right.f32()[i], named.f32()[i]) << i;
  }

  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(30, 3));  // (2, 3, 5)
  Tensor d_x = test::tensor_from(arena, s, std::vector<float>(30, 1.0f));         // (2, 3, 5)
  float d_s = 0.5f;
  scale_pullback(x, 3.0f, named, d_out, &d_x, nullptr);  // accumulates into d_x, skips d_s
  scale_pullback(x, 3.0f, named, d_out, nullptr, &d_s);  // accumulates into d_s, skips d_x
  double dot = 0.0;
  for (int i = 0; i < 30; ++i) {
    EXPECT_FLOAT_EQ(d_x.f32()[i], 1.0f + 3.0f * d_out.f32()[i]) << i;
    dot += static_cast<double>(d_out.f32()[i]) * x.f32()[i];
  }
  EXPECT_FLOAT_EQ(d_s, 0.5f + static_cast<float>(dot));
  scale_pullback(x, 3.0f, named, d_out, nullptr, nullptr);  // all inactive: nothing to do
}

TEST(ScaleApi, ReferenceAndFastModesAgree) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const Shape s{4, 64, 65};
  const int n = 4 * 64 * 65;
  Tensor x = test::tensor_from(arena, s, test::random_vector<float>(n, 5));      // (4, 64, 65)
  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(n, 6));  // (4, 64, 65)
  Tensor out_fast, out_ref;                                                      // (4, 64, 65)
  Tensor d_x_fast = arena.zeros(s, "d"), d_x_ref = arena.zeros(s, "d");          // (4, 64, 65)
  float d_s_fast = 0.0f, d_s_ref = 0.0f;
  {
    test::KernelModeScope m(KernelMode::Fast);
    out_fast = scale(x, 0.125f);
    scale_pullback(x, 0.125f, out_fast, d_out, &d_x_fast, &d_s_fast);
  }
  {
    test::KernelModeScope m(KernelMode::Reference);
    out_ref = scale(x, 0.125f);
    scale_pullback(x, 0.125f, out_ref, d_out, &d_x_ref, &d_s_ref);
  }
  using test::to_vector;
  EXPECT_TRUE(all_close("out", to_vector(out_fast), to_vector(out_ref), 0.0, 0.0));
  EXPECT_TRUE(all_close("d_x", to_vector(d_x_fast), to_vector(d_x_ref), 0.0, 0.0));
  EXPECT_TRUE(all_close("d_s", &d_s_fast, &d_s_ref, 1, 1e-6, 1e-6));
}

TEST(ScaleApi, RejectsBadArguments) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({2, 3}, "x"), wrong = arena.zeros({3, 2}, "wrong");
  EXPECT_TRUE(test::throws_error([&] { (void)(2.0f * x); }, {"[scale]", "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  EXPECT_TRUE(test::throws_error([&] { (void)scale(Tensor(), 2.0f); }, {"[scale]", "x has no storage"}));
  EXPECT_TRUE(test::throws_error([&] { scale_pullback(x, 2.0f, x, wrong, nullptr, nullptr); },
                                 {"[scale]", "d_out has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { scale_pullback(x, 2.0f, x, x, &wrong, nullptr); },
                                 {"[scale]", "d_x has shape (3, 2)", "expected (2, 3)"}));
}

}  // namespace
}  // namespace llmcc
