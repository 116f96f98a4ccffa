#include "diag/common.h"
namespace diag {
struct Model {
  Tensor w;
  Tensor forward(const Tensor& x) const { return act(x); }
};
// expect-error: 8:19: LLMCC_ADGEN_WRT names 'n', which is not a module, Tensor or float parameter of 'loss'
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("m, n") inline float loss(const Model& m, const Tensor& x, int n) {
  return total(m.forward(x)) * static_cast<float>(n);
}
}  // namespace diag
