#include "diag/common.h"
namespace diag {
struct Model {
  Tensor w;
  Tensor forward(const Tensor& x) const {
    Tensor y = act(x);
    // expect-error: 8:5: while loop whose trip count depends on a differentiable value
    while (total(y) > 1.0f) y = act(y);
    return y;
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
