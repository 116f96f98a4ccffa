#include "diag/common.h"
namespace diag {
struct Layer {
  Tensor w;
  Tensor forward(const Tensor& x) const { return act(x); }
};
struct Model {
  Layer first;
  // expect-error: 10:10: module field 'next' of type 'Layer *' holds parameters
  Layer* next = nullptr;
  Tensor forward(const Tensor& x) const { return next->forward(first.forward(x)); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
