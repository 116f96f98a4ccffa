// Golden: range-for over std::vector<Module> with a reassigned tensor local.
#pragma once
#include <vector>
#include "models/toy_rules.h"
namespace g_range {
using llmcc::Tensor;
struct Layer {
  Tensor w;
  Tensor forward(const Tensor& x) const { return toy::tanh_op(toy::matmul(x, w)); }
};
struct Stack {
  std::vector<Layer> layers;
  Tensor forward(const Tensor& x) const {
    Tensor y = x;
    for (const Layer& l : layers) y = l.forward(y);
    return y;
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Stack& m, const Tensor& x) { return toy::sumsq(m.forward(x)); }
}  // namespace g_range
