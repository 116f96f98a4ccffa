#include "diag/common.h"
namespace diag {
struct Layer {
  // expect-error: 5:12: LLMCC_ADGEN_OPTIONAL on field 'w', which is not a std::vector<Module>
  Tensor w LLMCC_ADGEN_OPTIONAL;
  Tensor forward(const Tensor& x) const { return act(x); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Layer& l, const Tensor& x) { return total(l.forward(x)); }
}  // namespace diag
