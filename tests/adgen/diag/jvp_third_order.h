#include "diag/common.h"
#include "llmcc/ops.h"
// Forward mode goes to the second order: the jvp of a jvp of a jvp is reported.
namespace diag {
inline Tensor f(const Tensor& x) { return x + x; }
LLMCC_ADGEN_JVP("f") llmcc::adgen::Dual f_jvp(const Tensor& x, const Tensor& dx);
LLMCC_ADGEN_JVP("f_jvp") llmcc::adgen::Dual2 f_jvp2(const Tensor& x, const Tensor& dx, const Tensor& ex, const Tensor& edx);
// expect-error: 10:21: forward mode goes to the second order
LLMCC_ADGEN_JVP("f_jvp2")
llmcc::adgen::Dual2 f_jvp3(const Tensor& x, const Tensor& dx, const Tensor& ex, const Tensor& edx, const Tensor& a,
                           const Tensor& b, const Tensor& c, const Tensor& d);
}  // namespace diag
