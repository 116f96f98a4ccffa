#include "diag/common.h"
namespace diag {
struct Model {
  Tensor w;
  Tensor forward(const Tensor& x) const {
    Tensor y = act(x);
    // expect-error: 8:5: goto: adgen supports structured control flow only
    goto done;
  done:
    return act(y);
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
