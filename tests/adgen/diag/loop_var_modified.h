#include <vector>
#include "diag/common.h"
namespace diag {
struct Layer {
  Tensor w;
  Tensor forward(const Tensor& x) const { return act(x); }
};
struct Model {
  std::vector<Layer> h;
  Tensor forward(const Tensor& x) const {
    Tensor y = x;
    // expect-error: 13:5: the loop variable 'i' is modified in the loop body
    for (int i = 0; i < static_cast<int>(h.size()); ++i) {
      y = h[i].forward(y);
      ++i;
    }
    return y;
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
