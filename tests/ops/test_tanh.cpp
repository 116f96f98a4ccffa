// tanh: fast kernel vs reference (Kernel), reference backward vs finite differences (Grad),
// front-end validation and pullback contract (Api); the suites are unary_op_suite.h's.
#include "llmcc/ops/tanh.h"

#include "kernels/cpu/tanh.h"
#include "kernels/ref/tanh.h"
#include "unary_op_suite.h"

namespace llmcc {
namespace {

const test::UnaryOp kTanh{
    "tanh",
    cpu::tanh_forward,
    cpu::tanh_backward,
    ref::tanh_forward<double>,
    ref::tanh_backward<double>,
    ref::tanh_forward<float>,
    ref::tanh_backward<float>,
    tanh,
    tanh_pullback,
    // The fast kernel uses a polynomial exp (a Taylor series below |x| = 1/4); it must stay this
    // close to the double reference.
    1e-6,
    1e-5,
    12.0,  // both saturated tails
    // Beyond exp's float range, zero, denormals and both sides of the switch at |x| = 1/4.
    {-1e30f, -1e4f, -150.0f,    -88.5f, -44.5f, -20.0f, -0.25f, -0.2499999f, -1e-3f, -1e-40f, 0.0f,
     1e-40f, 1e-3f, 0.2499999f, 0.25f,  20.0f,  44.5f,  88.5f,  150.0f,      1e4f,   1e30f}};

TEST(TanhKernel, ForwardAndBackwardMatchReference) { test::unary_kernel_matches_reference(kTanh); }
TEST(TanhKernel, ExtremeInputsMatchReference) { test::unary_extreme_inputs_match_reference(kTanh); }
TEST(TanhGrad, ReferenceBackwardMatchesFiniteDifferences) {
  test::unary_reference_backward_matches_finite_differences(kTanh);
}
TEST(TanhApi, ForwardAndPullbackAccumulateAndSkipNulls) {
  test::unary_forward_and_pullback_accumulate_and_skip_nulls(kTanh);
}
TEST(TanhApi, ReferenceAndFastModesAgree) { test::unary_reference_and_fast_modes_agree(kTanh); }
TEST(TanhApi, RejectsBadArguments) { test::unary_rejects_bad_arguments(kTanh); }

}  // namespace
}  // namespace llmcc
