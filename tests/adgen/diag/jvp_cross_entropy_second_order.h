#include "diag/common.h"
#include "llmcc/ops.h"
// cross_entropy's tangent is first order: a jvp of a jvp through it is refused at the outer jvp.
namespace diag {
inline Tensor f(const Tensor& z, const llmcc::Tokens& y) { return llmcc::scale(z, llmcc::cross_entropy(z, y, 4, -1)); }
LLMCC_ADGEN_JVP("f") llmcc::adgen::Dual f_jvp(const Tensor& z, const llmcc::Tokens& y, const Tensor& dz);
// expect-error: 8:46: a second derivative of cross_entropy
LLMCC_ADGEN_JVP("f_jvp") llmcc::adgen::Dual2 f_jvp2(const Tensor& z, const llmcc::Tokens& y, const Tensor& dz,
                                                   const Tensor& z_tangent, const Tensor& dz_tangent);
}  // namespace diag
