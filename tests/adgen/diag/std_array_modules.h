#include <array>

#include "diag/common.h"
namespace diag {
struct Layer {
  Tensor w;
  Tensor forward(const Tensor& x) const { return act(x); }
};
struct Model {
  // expect-error: 11:24: module field 'layers' of type 'std::array<Layer, 2>' holds parameters
  std::array<Layer, 2> layers;
  Tensor forward(const Tensor& x) const { return layers[1].forward(layers[0].forward(x)); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return total(m.forward(x)); }
}  // namespace diag
