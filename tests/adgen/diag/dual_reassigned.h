#include "diag/common.h"
#include "llmcc/ops.h"
// A Dual local is bound once; reassigning it would leave the backward reading the wrong call.
namespace diag {
struct Model {
  Tensor w;
};
inline Tensor f(const Model& m, const Tensor& x) { return x + m.w; }
LLMCC_ADGEN_JVP("f") llmcc::adgen::Dual f_jvp(const Model& m, const Tensor& x, const Tensor& dx);
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) {
  llmcc::adgen::Dual r = f_jvp(m, x, x);
  // expect-error: 13:5: assignment to the Dual local 'r'
  r = f_jvp(m, r.value, x);
  return total(r.tangent);
}
}  // namespace diag
