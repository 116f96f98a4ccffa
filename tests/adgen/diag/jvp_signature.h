#include "diag/common.h"
// A jvp declaration whose tangent is missing: adgen says which declaration it expects.
namespace diag {
struct Model {
  Tensor w;
};
inline Tensor f(const Model& m, const Tensor& x) { return act(x); }
// expect-error: 9:41: the declaration must be `llmcc::adgen::Dual f_jvp(const diag::Model & m, const llmcc::Tensor & x, const llmcc::Tensor& x_tangent)`
LLMCC_ADGEN_JVP("f") llmcc::adgen::Dual f_jvp(const Model& m, const Tensor& x);
}  // namespace diag
