#include "diag/common.h"
namespace diag {
Tensor twist(const Tensor& x, const Tensor& w);
// The adjoint of w is misnamed (d_weight instead of d_w).
void twist_pullback(const Tensor& x, const Tensor& w, const Tensor& out, const Tensor& d_out, Tensor* d_x,
                    Tensor* d_weight);
struct Model {
  Tensor w;
  // expect-error: 10:50: pullback 'twist_pullback' parameter 6 'd_weight' names no primal parameter
  Tensor forward(const Tensor& x) const { return twist(x, w); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
