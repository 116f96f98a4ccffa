#include "diag/common.h"
namespace diag {
struct Model {
  Tensor w;
  Tensor forward(const Tensor& x) const {
    Tensor y = act(x);
    // expect-error: 8:7: mutation of a saved tensor: 'f32()'
    y.f32()[0] = 0.0f;
    return act(y);
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
