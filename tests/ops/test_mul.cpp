// mul: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract, including x * x (Api); the suites shared with
// scale are binary_op_suite.h's.
#include "llmcc/ops/mul.h"

#include <cfloat>
#include <cmath>

#include "binary_op_suite.h"
#include "kernels/cpu/mul.h"
#include "kernels/ref/mul.h"
#include "test_support.h"

namespace llmcc {
namespace {

const test::BinaryOp kMul{"mul",
                          {"a", "b"},
                          false,
                          0.0f,
                          true,
                          cpu::mul_forward,
                          cpu::mul_backward,
                          ref::mul_forward<float>,
                          ref::mul_backward<float>,
                          ref::mul_forward<double>,
                          ref::mul_backward<double>,
                          {mul, [](const Tensor& a, const Tensor& b) { return a * b; }},
                          mul_pullback,
                          // Backward sums may contract to FMA differently in the two kernels; products are exact.
                          {1e-6, 1e-6},
                          {1e-6, 1e-6}};

TEST(MulKernel, ForwardAndBackwardMatchReference) { test::binary_kernel_matches_reference(kMul); }
TEST(MulGrad, ReferenceBackwardMatchesFiniteDifferences) {
  test::binary_reference_backward_matches_finite_differences(kMul);
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

TEST(MulApi, ForwardAndPullbackAccumulateAndSkipNulls) {
  test::binary_forward_and_pullback_accumulate_and_skip_nulls(kMul);
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
      // The pullback adds x * d twice, (0.5 + x d) + x d, and the check computes 0.5 + 2 x d:
      // they agree to a few roundings of the largest term, not bit for bit (near cancellation
      // the relative difference grows).
      const float xd = x.f32()[i] * d_out.f32()[i];
      EXPECT_NEAR(d_x.f32()[i], 0.5f + 2.0f * xd, 4 * FLT_EPSILON * (0.5f + 2.0f * std::fabs(xd))) << i;
    }
  }
}

TEST(MulApi, ReferenceAndFastModesAgree) { test::binary_reference_and_fast_modes_agree(kMul); }
TEST(MulApi, RejectsMismatchedShapes) { test::binary_rejects_bad_arguments(kMul); }

}  // namespace
}  // namespace llmcc
