// mul: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract, including x * x (Api).
#include "llmcc/ops/mul.h"

#include "kernels/cpu/mul.h"
#include "kernels/ref/mul.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

// Backward sums may contract to FMA differently in the two kernels; products are exact.
constexpr double kAtol = 1e-6, kRtol = 1e-6;

TEST(MulKernel, ForwardAndBackwardMatchReference) {
  test::for_each_thread_count([](int) {
    for (int n : test::awkward_sizes()) {
      for (int n2 : {n, n * 197 + 5}) {  // also a size large enough to go parallel
        SCOPED_TRACE("n=" + std::to_string(n2));
        const auto a = test::random_vector<float>(n2, 1), b = test::random_vector<float>(n2, 2);
        const auto d_out = test::random_vector<float>(n2, 3);  // (n2)
        std::vector<float> out(n2), out_ref(n2);               // (n2)
        cpu::mul_forward(out.data(), a.data(), b.data(), n2);
        ref::mul_forward(out_ref.data(), a.data(), b.data(), n2);
        EXPECT_TRUE(all_close("out", out, out_ref, 0.0, 0.0));

        // Every activity pattern: both, only a, only b, and one adjoint for both (x * x).
        for (int pattern = 0; pattern < 4; ++pattern) {
          SCOPED_TRACE("pattern=" + std::to_string(pattern));
          auto d_a = test::random_vector<float>(n2, 4), d_b = test::random_vector<float>(n2, 5);
          auto d_a_ref = d_a, d_b_ref = d_b;  // (n2) each, pre-filled: must accumulate
          float* fa = pattern == 2 ? nullptr : d_a.data();
          float* fb = pattern == 1 ? nullptr : pattern == 3 ? d_a.data() : d_b.data();
          float* ra = pattern == 2 ? nullptr : d_a_ref.data();
          float* rb = pattern == 1 ? nullptr : pattern == 3 ? d_a_ref.data() : d_b_ref.data();
          cpu::mul_backward(fa, fb, a.data(), b.data(), d_out.data(), n2);
          ref::mul_backward(ra, rb, a.data(), b.data(), d_out.data(), n2);
          EXPECT_TRUE(all_close("d_a", d_a, d_a_ref, kAtol, kRtol));
          EXPECT_TRUE(all_close("d_b", d_b, d_b_ref, kAtol, kRtol));
        }
      }
    }
  });
}

TEST(MulGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int n = 37;
  auto a = test::random_vector<double>(n, 11), b = test::random_vector<double>(n, 12);  // (n)
  const auto w = test::random_vector<double>(n, 13);                                    // (n) adjoint of out
  auto loss = [&] {
    std::vector<double> out(n);  // (n)
    ref::mul_forward(out.data(), a.data(), b.data(), n);
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_a(n, 0.0), d_b(n, 0.0);  // (n)
  ref::mul_backward(d_a.data(), d_b.data(), a.data(), b.data(), w.data(), n);
  EXPECT_TRUE(test::fd_check(loss, {{"a", &a, &d_a}, {"b", &b, &d_b}}));
}

TEST(MulGrad, SquareThroughOneAdjointMatchesFiniteDifferences) {
  // x * x: the same input in both slots, so the same adjoint for both; d/dx = 2 x w.
  const int n = 37;
  auto x = test::random_vector<double>(n, 21);        // (n)
  const auto w = test::random_vector<double>(n, 22);  // (n) adjoint of out
  auto loss = [&] {
    std::vector<double> out(n);  // (n)
    ref::mul_forward(out.data(), x.data(), x.data(), n);
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_x(n, 0.0);  // (n)
  ref::mul_backward(d_x.data(), d_x.data(), x.data(), x.data(), w.data(), n);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}}));
}

// Sets the kernel mode for a scope and restores the previous one.
TEST(MulApi, ForwardAndPullbackAccumulateAndSkipNulls) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Shape s{2, 3, 5};
  Tensor a = test::tensor_from(arena, s, test::random_vector<float>(30, 1));  // (2, 3, 5)
  Tensor b = test::tensor_from(arena, s, test::random_vector<float>(30, 2));  // (2, 3, 5)
  Tensor out = a * b;                                                         // (2, 3, 5)
  ASSERT_EQ(out.shape(), s);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(out.f32()[i], a.f32()[i] * b.f32()[i]);

  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(30, 3));  // (2, 3, 5)
  Tensor d_a = test::tensor_from(arena, s, std::vector<float>(30, 1.0f));         // (2, 3, 5)
  Tensor d_b = test::tensor_from(arena, s, std::vector<float>(30, 2.0f));         // (2, 3, 5)
  mul_pullback(a, b, out, d_out, &d_a, nullptr);                                  // accumulates into d_a, skips d_b
  mul_pullback(a, b, out, d_out, nullptr, &d_b);                                  // and the other way round
  for (int i = 0; i < 30; ++i) {
    EXPECT_FLOAT_EQ(d_a.f32()[i], 1.0f + d_out.f32()[i] * b.f32()[i]) << i;
    EXPECT_FLOAT_EQ(d_b.f32()[i], 2.0f + d_out.f32()[i] * a.f32()[i]) << i;
  }
  mul_pullback(a, b, out, d_out, nullptr, nullptr);  // all inactive: nothing to do
}

TEST(MulApi, SquareAccumulatesBothTermsIntoOneAdjoint) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Shape s{3, 7};
  Tensor x = test::tensor_from(arena, s, test::random_vector<float>(21, 1));      // (3, 7)
  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(21, 2));  // (3, 7)
  for (KernelMode mode : {KernelMode::Fast, KernelMode::Reference}) {
    test::KernelModeScope m(mode);
    SCOPED_TRACE(mode == KernelMode::Fast ? "fast" : "reference");
    Tensor out = x * x;                                                      // (3, 7)
    Tensor d_x = test::tensor_from(arena, s, std::vector<float>(21, 0.5f));  // (3, 7)
    mul_pullback(x, x, out, d_out, &d_x, &d_x);
    for (int i = 0; i < 21; ++i) {
      EXPECT_FLOAT_EQ(d_x.f32()[i], 0.5f + 2.0f * x.f32()[i] * d_out.f32()[i]) << i;
    }
  }
}

TEST(MulApi, ReferenceAndFastModesAgree) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const Shape s{4, 64, 65};
  const int n = 4 * 64 * 65;
  Tensor a = test::tensor_from(arena, s, test::random_vector<float>(n, 5));      // (4, 64, 65)
  Tensor b = test::tensor_from(arena, s, test::random_vector<float>(n, 6));      // (4, 64, 65)
  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(n, 7));  // (4, 64, 65)
  Tensor out_fast, out_ref;                                                      // (4, 64, 65)
  Tensor d_a_fast = arena.zeros(s, "d"), d_b_fast = arena.zeros(s, "d");         // (4, 64, 65)
  Tensor d_a_ref = arena.zeros(s, "d"), d_b_ref = arena.zeros(s, "d");           // (4, 64, 65)
  {
    test::KernelModeScope m(KernelMode::Fast);
    out_fast = mul(a, b);
    mul_pullback(a, b, out_fast, d_out, &d_a_fast, &d_b_fast);
  }
  {
    test::KernelModeScope m(KernelMode::Reference);
    out_ref = mul(a, b);
    mul_pullback(a, b, out_ref, d_out, &d_a_ref, &d_b_ref);
  }
  using test::to_vector;
  EXPECT_TRUE(all_close("out", to_vector(out_fast), to_vector(out_ref), 0.0, 0.0));
  EXPECT_TRUE(all_close("d_a", to_vector(d_a_fast), to_vector(d_a_ref), kAtol, kRtol));
  EXPECT_TRUE(all_close("d_b", to_vector(d_b_fast), to_vector(d_b_ref), kAtol, kRtol));
}

TEST(MulApi, RejectsMismatchedShapes) {
  Arena arena(1 << 20);
  Tensor a = arena.zeros({2, 3}, "a"), b = arena.zeros({3, 2}, "b");
  EXPECT_TRUE(test::throws_error([&] { (void)mul(a, a); }, {"[mul]", "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  EXPECT_TRUE(test::throws_error([&] { (void)(a * b); }, {"[mul]", "b has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { (void)mul(Tensor(), a); }, {"[mul]", "a has no storage"}));
  EXPECT_TRUE(test::throws_error([&] { mul_pullback(a, a, a, b, nullptr, nullptr); },
                                 {"[mul]", "d_out has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { mul_pullback(a, a, a, a, nullptr, &b); },
                                 {"[mul]", "d_b has shape (3, 2)", "expected (2, 3)"}));
}

}  // namespace
}  // namespace llmcc
