#include "diag/common.h"
// A rule without a tangent rule on the path from the tangent's argument to the value.
namespace diag {
struct Model {
  Tensor w;
};
inline Tensor f(const Model& m, const Tensor& x) { return act(x); }
// expect-error: 9:41: no tangent rule for 'diag::act'
LLMCC_ADGEN_JVP("f") llmcc::adgen::Dual f_jvp(const Model& m, const Tensor& x, const Tensor& dx);
}  // namespace diag
