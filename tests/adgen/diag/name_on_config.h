#include "diag/common.h"
namespace diag {
struct Layer {
  Tensor w;
  // expect-error: 6:14: LLMCC_ADGEN_NAME on field 'n_head', which holds no parameters
  int n_head LLMCC_ADGEN_NAME("heads") = 0;
  Tensor forward(const Tensor& x) const { return act(x); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Layer& l, const Tensor& x) { return total(l.forward(x)); }
}  // namespace diag
