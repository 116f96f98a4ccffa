// gelu: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract (Api); the suites are unary_op_suite.h's.
#include "llmcc/ops/gelu.h"

#include "kernels/cpu/gelu.h"
#include "kernels/ref/gelu.h"
#include "unary_op_suite.h"

namespace llmcc {
namespace {

const test::UnaryOp kGelu{
    "gelu",
    cpu::gelu_forward,
    [](float* d_x, const float* x, const float* d_out, std::int64_t n) { cpu::gelu_backward(d_x, x, d_out, n); },
    ref::gelu_forward<double>,
    ref::gelu_backward<double>,
    ref::gelu_forward<float>,
    ref::gelu_backward<float>,
    gelu,
    gelu_pullback,
    // The fast kernel uses sigmoid(2u) with a polynomial exp; it must stay this close to the
    // double reference (its worst error over [-20, 20] is 0.06 of this bound).
    1e-6,
    1e-5,
    12.0,  // both saturated tails: gelu -> 0 and gelu -> x
    // Beyond exp's float range (|2u| > 88 from |x| > ~10), zero and denormals: the clamp in
    // fast_exp must not show. (|x| > ~1e19 overflows x^2 in the float derivative, in the
    // reference too; activations never get there.)
    {-1e4f, -150.0f, -30.0f, -11.0f, -10.0f, -5.0f, -0.75f, -1e-3f, -1e-40f, 0.0f, 1e-40f, 1e-3f, 0.75f, 5.0f, 10.0f,
     11.0f, 30.0f, 150.0f, 1e4f}};

TEST(GeluKernel, ForwardAndBackwardMatchReference) { test::unary_kernel_matches_reference(kGelu); }
TEST(GeluKernel, ExtremeInputsMatchReference) { test::unary_extreme_inputs_match_reference(kGelu); }
TEST(GeluGrad, ReferenceBackwardMatchesFiniteDifferences) {
  test::unary_reference_backward_matches_finite_differences(kGelu);
}
TEST(GeluApi, ForwardAndPullbackAccumulateAndSkipNulls) {
  test::unary_forward_and_pullback_accumulate_and_skip_nulls(kGelu);
}
TEST(GeluApi, ReferenceAndFastModesAgree) { test::unary_reference_and_fast_modes_agree(kGelu); }
TEST(GeluApi, RejectsBadArguments) { test::unary_rejects_bad_arguments(kGelu); }

}  // namespace
}  // namespace llmcc
