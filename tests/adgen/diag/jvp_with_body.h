#include "diag/common.h"
// adgen defines a jvp function: one written by hand is an error, not silently replaced.
namespace diag {
struct Model {
  Tensor w;
};
inline Tensor f(const Model& m, const Tensor& x) { return act(x); }
// expect-error: 9:41: 'f_jvp' is marked LLMCC_ADGEN_JVP and has a body: adgen defines it
LLMCC_ADGEN_JVP("f") llmcc::adgen::Dual f_jvp(const Model& m, const Tensor& x, const Tensor& dx) {
  return {act(x), dx};
}
}  // namespace diag
