#include "diag/common.h"
namespace diag {
float opaque(float x);
// expect-error: 6:16: map_unary<f>: f must be a function `float f(float)` with a body
LLMCC_ADGEN_ENTRY inline float loss(const Tensor& x) {
  return total(llmcc::adgen::map_unary<opaque>(x, "opaque"));
}
}  // namespace diag
