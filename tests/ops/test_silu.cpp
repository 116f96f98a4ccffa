// silu: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract (Api).
#include "llmcc/ops/silu.h"

#include <limits>

#include "kernels/cpu/silu.h"
#include "kernels/ref/silu.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

// The fast kernel uses a polynomial exp; it must stay this close to the reference in double
// (measured worst: 0.04 of this bound over [-20, 20]).
constexpr double kAtol = 1e-6, kRtol = 1e-5;

// Runs the fast kernel on x (n) and compares out and an accumulated d_x with the reference
// kernel run in double on the same inputs (the float reference itself loses digits where the
// derivative cancels, so it is no yardstick at this tolerance).
void expect_fast_matches_reference(const std::vector<float>& x, const std::vector<float>& d_out) {
  const auto n = static_cast<std::int64_t>(x.size());
  const auto xd = test::cast_vector<double>(x), d_out_d = test::cast_vector<double>(d_out);
  std::vector<float> out(x.size());      // (n)
  std::vector<double> out_ref(x.size());  // (n)
  cpu::silu_forward(out.data(), x.data(), n);
  ref::silu_forward(out_ref.data(), xd.data(), n);
  EXPECT_TRUE(all_close("out", out, out_ref, kAtol, kRtol));

  auto d_x = test::random_vector<float>(x.size(), 9);  // (n), pre-filled: must accumulate
  auto d_x_ref = test::cast_vector<double>(d_x);        // (n)
  cpu::silu_backward(d_x.data(), x.data(), d_out.data(), n);
  ref::silu_backward(d_x_ref.data(), xd.data(), d_out_d.data(), n);
  EXPECT_TRUE(all_close("d_x", d_x, d_x_ref, kAtol, kRtol));
}

TEST(SiluKernel, ForwardAndBackwardMatchReference) {
  test::for_each_thread_count([](int) {
    for (int n : test::awkward_sizes()) {
      for (int n2 : {n, n * 197 + 5}) {  // also a size large enough to go parallel
        SCOPED_TRACE("n=" + std::to_string(n2));
        // Range wide enough to reach the saturated tails of the sigmoid.
        expect_fast_matches_reference(test::random_vector<float>(n2, 1, -12.0, 12.0),
                                      test::random_vector<float>(n2, 2));
      }
    }
  });
}

TEST(SiluKernel, ExtremeInputsMatchReference) {
  // Beyond exp's float range (|x| > 88), zero and denormals: the clamp in fast_exp must not show.
  const std::vector<float> x = {-1e30f, -1e4f, -150.0f, -100.0f, -88.5f, -87.5f, -20.0f, -1e-3f,
                                -1e-40f, 0.0f, 1e-40f, 1e-3f, 20.0f, 87.5f, 88.5f, 100.0f, 150.0f,
                                1e4f, 1e30f};
  expect_fast_matches_reference(x, std::vector<float>(x.size(), 1.0f));
  std::vector<float> out(1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  cpu::silu_forward(out.data(), &nan, 1);
  EXPECT_TRUE(std::isnan(out[0])) << "NaN must propagate, got " << out[0];
}

TEST(SiluGrad, ReferenceBackwardMatchesFiniteDifferences) {
  const int n = 41;
  auto x = test::random_vector<double>(n, 11, -6.0, 6.0);  // (n)
  const auto w = test::random_vector<double>(n, 13);        // (n) adjoint of out
  auto loss = [&] {
    std::vector<double> out(n);  // (n)
    ref::silu_forward(out.data(), x.data(), n);
    return test::weighted_sum(out, w);
  };
  std::vector<double> d_x(n, 0.0);  // (n)
  ref::silu_backward(d_x.data(), x.data(), w.data(), n);
  EXPECT_TRUE(test::fd_check(loss, {{"x", &x, &d_x}}));
}

// Sets the kernel mode for a scope and restores the previous one.
TEST(SiluApi, ForwardAndPullbackAccumulateAndSkipNulls) {
  Arena arena(1 << 20);
  ArenaScope scope(arena);
  const Shape s{2, 3, 5};
  const auto xv = test::random_vector<float>(30, 1, -4.0, 4.0);
  Tensor x = test::tensor_from(arena, s, xv);  // (2, 3, 5)
  Tensor out = silu(x);                         // (2, 3, 5)
  ASSERT_EQ(out.shape(), s);
  std::vector<float> expect(30);
  ref::silu_forward(expect.data(), xv.data(), 30);
  EXPECT_TRUE(all_close("out", test::to_vector(out), expect, kAtol, kRtol));

  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(30, 3));  // (2, 3, 5)
  Tensor d_x = test::tensor_from(arena, s, std::vector<float>(30, 1.0f));         // (2, 3, 5)
  silu_pullback(x, out, d_out, &d_x);  // accumulates onto the 1s
  std::vector<float> d_expect(30, 1.0f);
  ref::silu_backward(d_expect.data(), xv.data(), d_out.f32(), 30);
  EXPECT_TRUE(all_close("d_x", test::to_vector(d_x), d_expect, kAtol, kRtol));
  silu_pullback(x, out, d_out, nullptr);  // inactive input: nothing to do, nothing thrown
}

TEST(SiluApi, ReferenceAndFastModesAgree) {
  Arena arena(1 << 22);
  ArenaScope scope(arena);
  const Shape s{4, 64, 65};
  const int n = 4 * 64 * 65;
  // Moderate inputs: this compares with the float reference, which (unlike the fast kernel)
  // cancels in the derivative's tails; accuracy there is the Kernel suite's job, against double.
  const auto xv = test::random_vector<float>(n, 5, -4.0, 4.0);
  Tensor x = test::tensor_from(arena, s, xv);  // (4, 64, 65)
  Tensor d_out = test::tensor_from(arena, s, test::random_vector<float>(n, 6));  // (4, 64, 65)
  Tensor out_fast, out_ref;  // (4, 64, 65)
  Tensor d_fast = arena.zeros(s, "d_fast"), d_ref = arena.zeros(s, "d_ref");  // (4, 64, 65)
  {
    test::KernelModeScope m(KernelMode::Fast);
    out_fast = silu(x);
    silu_pullback(x, out_fast, d_out, &d_fast);
  }
  {
    test::KernelModeScope m(KernelMode::Reference);
    out_ref = silu(x);
    silu_pullback(x, out_ref, d_out, &d_ref);
  }
  EXPECT_TRUE(all_close("out", test::to_vector(out_fast), test::to_vector(out_ref), kAtol, kRtol));
  EXPECT_TRUE(all_close("d_x", test::to_vector(d_fast), test::to_vector(d_ref), kAtol, kRtol));
  // Polynomial exp vs libm: bitwise equality everywhere would mean one kernel ran twice.
  EXPECT_NE(test::to_vector(out_fast), test::to_vector(out_ref)) << "kernel_mode had no effect";
}

TEST(SiluApi, RejectsBadArguments) {
  Arena arena(1 << 20);
  Tensor x = arena.zeros({2, 3}, "x"), wrong = arena.zeros({3, 2}, "wrong");
  EXPECT_TRUE(test::throws_error([&] { (void)silu(x); }, {"[silu]", "no arena", "ArenaScope"}));
  ArenaScope scope(arena);
  EXPECT_TRUE(test::throws_error([&] { (void)silu(Tensor()); }, {"[silu]", "x has no storage"}));
  EXPECT_TRUE(test::throws_error([&] { silu_pullback(x, x, wrong, nullptr); },
                                 {"[silu]", "d_out has shape (3, 2)", "expected (2, 3)"}));
  EXPECT_TRUE(test::throws_error([&] { silu_pullback(x, x, x, &wrong); },
                                 {"[silu]", "d_x has shape (3, 2)", "expected (2, 3)"}));
}

}  // namespace
}  // namespace llmcc
