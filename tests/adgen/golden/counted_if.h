// Golden: counted for over layers with an if/else on configuration inside.
#pragma once
#include <vector>
#include "models/toy_rules.h"
namespace g_counted {
using llmcc::Tensor;
struct Layer {
  Tensor w;
};
struct Net {
  int skip_every = 2;  // configuration
  std::vector<Layer> layers;
  Tensor forward(const Tensor& x) const {
    Tensor y = x;
    for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
      if (i % skip_every == 0)
        y = y + toy::matmul(y, layers[i].w);
      else
        y = toy::tanh_op(toy::matmul(y, layers[i].w));
    }
    return y;
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Net& m, const Tensor& x) { return toy::sumsq(m.forward(x)); }
}  // namespace g_counted
