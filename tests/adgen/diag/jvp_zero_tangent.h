#include "diag/common.h"
#include "llmcc/ops.h"
// The value does not depend on the argument the tangent is taken along: its tangent would be
// zero, which is reported rather than generated.
namespace diag {
struct Model {
  Tensor w;
};
inline Tensor f(const Model& m, const Tensor& x, const Tensor& y) { return act(m.w) + y; }
// expect-error: 12:20: the returned value does not depend on the arguments the tangent is taken along
LLMCC_ADGEN_JVP_WRT("f", "x")
llmcc::adgen::Dual f_jvp(const Model& m, const Tensor& x, const Tensor& y, const Tensor& dx);
}  // namespace diag
