// silu: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract (Api); the suites are unary_op_suite.h's.
#include "llmcc/ops/silu.h"

#include "kernels/cpu/silu.h"
#include "kernels/ref/silu.h"
#include "unary_op_suite.h"

namespace llmcc {
namespace {

const test::UnaryOp kSilu{
    "silu",
    cpu::silu_forward,
    cpu::silu_backward,
    ref::silu_forward<double>,
    ref::silu_backward<double>,
    ref::silu_forward<float>,
    ref::silu_backward<float>,
    silu,
    silu_pullback,
    // The fast kernel uses a polynomial exp; it must stay this close to the double reference
    // (its worst error over [-20, 20] is 0.04 of this bound).
    1e-6,
    1e-5,
    12.0,  // the saturated tails of the sigmoid
    // Beyond exp's float range (|x| > 88), zero and denormals: the clamp in fast_exp must not show.
    {-1e30f, -1e4f, -150.0f, -100.0f, -88.5f, -87.5f, -20.0f, -1e-3f, -1e-40f, 0.0f, 1e-40f, 1e-3f, 20.0f, 87.5f, 88.5f,
     100.0f, 150.0f, 1e4f, 1e30f}};

TEST(SiluKernel, ForwardAndBackwardMatchReference) { test::unary_kernel_matches_reference(kSilu); }
TEST(SiluKernel, ExtremeInputsMatchReference) { test::unary_extreme_inputs_match_reference(kSilu); }
TEST(SiluGrad, ReferenceBackwardMatchesFiniteDifferences) {
  test::unary_reference_backward_matches_finite_differences(kSilu);
}
TEST(SiluApi, ForwardAndPullbackAccumulateAndSkipNulls) {
  test::unary_forward_and_pullback_accumulate_and_skip_nulls(kSilu);
}
TEST(SiluApi, ReferenceAndFastModesAgree) { test::unary_reference_and_fast_modes_agree(kSilu); }
TEST(SiluApi, RejectsBadArguments) { test::unary_rejects_bad_arguments(kSilu); }

}  // namespace
}  // namespace llmcc
