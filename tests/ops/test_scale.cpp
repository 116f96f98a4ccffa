// scale: fast kernel vs reference (Kernel), reference backward vs finite differences for x and
// s (Grad), front-end validation and pullback contract (Api); the suites shared with mul are
// binary_op_suite.h's, with s as a one-element operand b.
#include "llmcc/ops/scale.h"

#include "binary_op_suite.h"
#include "kernels/cpu/scale.h"
#include "kernels/ref/scale.h"
#include "test_support.h"

namespace llmcc {
namespace {

using test::all_close;

// The kernels and the front end with s passed as the one value that b (1) points at.
const test::BinaryOp kScale{
    "scale",
    {"x", "s"},
    true,
    // A power of two: s * d_out is exact, so d_x agrees bit for bit whether or not a kernel
    // contracts d_x + s * d_out to an FMA.
    -0.125f,
    false,
    [](float* out, const float* x, const float* s, std::int64_t n) { cpu::scale_forward(out, x, *s, n); },
    [](float* d_x, float* d_s, const float* x, const float* s, const float* d_out, std::int64_t n) {
      cpu::scale_backward(d_x, d_s, x, *s, d_out, n);
    },
    [](float* out, const float* x, const float* s, std::int64_t n) { ref::scale_forward(out, x, *s, n); },
    [](float* d_x, float* d_s, const float* x, const float* s, const float* d_out, std::int64_t n) {
      ref::scale_backward(d_x, d_s, x, *s, d_out, n);
    },
    [](double* out, const double* x, const double* s, std::int64_t n) { ref::scale_forward(out, x, *s, n); },
    [](double* d_x, double* d_s, const double* x, const double* s, const double* d_out, std::int64_t n) {
      ref::scale_backward(d_x, d_s, x, *s, d_out, n);
    },
    {[](const Tensor& x, const Tensor& s) { return scale(x, s.f32()[0]); },
     [](const Tensor& x, const Tensor& s) { return s.f32()[0] * x; },
     [](const Tensor& x, const Tensor& s) { return x * s.f32()[0]; }},
    [](const Tensor& x, const Tensor& s, const Tensor& out, const Tensor& d_out, Tensor* d_x, Tensor* d_s) {
      scale_pullback(x, s.f32()[0], out, d_out, d_x, d_s ? d_s->f32() : nullptr);
    },
    {0.0, 0.0},
    // d_s: both kernels sum in double; only the summation order differs.
    {1e-6, 1e-6}};

TEST(ScaleKernel, ForwardAndBackwardMatchReference) { test::binary_kernel_matches_reference(kScale); }

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
  test::binary_reference_backward_matches_finite_differences(kScale);
}
TEST(ScaleApi, OperatorsAndPullbackAccumulateAndSkipNulls) {
  test::binary_forward_and_pullback_accumulate_and_skip_nulls(kScale);
}
TEST(ScaleApi, ReferenceAndFastModesAgree) { test::binary_reference_and_fast_modes_agree(kScale); }
TEST(ScaleApi, RejectsBadArguments) { test::binary_rejects_bad_arguments(kScale); }

}  // namespace
}  // namespace llmcc
