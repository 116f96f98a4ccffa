#include "diag/common.h"
namespace diag {
struct Layer {
  Tensor w LLMCC_ADGEN_NAME("weight");
  // expect-error: 6:10: module field 'v' gives parameters the name 'weight', as field 'w' does
  Tensor v LLMCC_ADGEN_NAME("weight");
  Tensor forward(const Tensor& x) const { return act(x); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Layer& l, const Tensor& x) { return total(l.forward(x)); }
}  // namespace diag
