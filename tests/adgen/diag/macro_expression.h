#include "diag/common.h"
// A macro whose expansion is a differentiated expression: adgen would copy its text where the
// expression's saved values belong, so it refuses it where it is used.
#define TWICE_ACT(x) act(act(x))
namespace diag {
struct Model {
  Tensor w;
  Tensor forward(const Tensor& x) const {
    // expect-error: 10:12: the macro 'TWICE_ACT' expands inside a differentiated expression
    return TWICE_ACT(x);
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
