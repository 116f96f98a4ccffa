#include "diag/common.h"
namespace diag {
Tensor bend(const Tensor& x, int k);
// The config argument k is given an adjoint.
void bend_pullback(const Tensor& x, int k, const Tensor& out, const Tensor& d_out, Tensor* d_x, Tensor* d_k);
struct Model {
  Tensor w;
  // expect-error: 9:50: parameter 'd_k' has type 'Tensor *', expected '<none>' for primal parameter 'k' of type 'int' (it takes no adjoint)
  Tensor forward(const Tensor& x) const { return bend(act(x), 3); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
