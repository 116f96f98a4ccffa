#include "diag/common.h"
namespace diag {
struct Layer {
  Tensor w;
  virtual Tensor forward(const Tensor& x) const { return act(x); }
  virtual ~Layer() = default;
};
struct Model {
  Layer l;
  // expect-error: 11:56: virtual call of 'diag::Layer::forward'
  Tensor forward(const Tensor& x) const { return act(l.forward(x)); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
