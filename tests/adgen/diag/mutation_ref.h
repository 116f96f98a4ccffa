#include "diag/common.h"
namespace diag {
void scribble(Tensor& t);
struct Model {
  Tensor w;
  Tensor forward(const Tensor& x) const {
    Tensor y = act(x);
    // expect-error: 9:14: mutation of a saved tensor: 'y' is passed to a non-const reference
    scribble(y);
    return act(y);
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
