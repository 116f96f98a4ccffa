#include "diag/common.h"
namespace diag {
struct Layer {
  // expect-error: 5:12: LLMCC_ADGEN_NAME("weight.") on field 'w': a parameter name part
  Tensor w LLMCC_ADGEN_NAME("weight.");
  Tensor forward(const Tensor& x) const { return act(x); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Layer& l, const Tensor& x) { return total(l.forward(x)); }
}  // namespace diag
