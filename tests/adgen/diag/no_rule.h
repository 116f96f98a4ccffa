#include "diag/common.h"
namespace diag {
Tensor mystery(const Tensor& x);  // declared only: no body, no mystery_pullback
struct Model {
  Tensor w;
  // expect-error: 7:50: call of 'diag::mystery' has no rule (no 'mystery_pullback' declared beside it) and no body
  Tensor forward(const Tensor& x) const { return mystery(x); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
