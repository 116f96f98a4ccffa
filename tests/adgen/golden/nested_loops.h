// Golden: a range-for inside a counted for (nested per-iteration records).
#pragma once
#include <vector>
#include "models/toy_rules.h"
namespace g_nested {
using llmcc::Tensor;
struct Layer {
  Tensor w;
};
struct Stage {
  std::vector<Layer> layers;
};
struct Net {
  int repeats = 2;  // configuration
  std::vector<Stage> stages;
  Tensor forward(const Tensor& x) const {
    Tensor y = x;
    for (int r = 0; r < repeats; ++r)
      for (const Stage& s : stages)
        for (const Layer& l : s.layers) y = toy::tanh_op(toy::matmul(y, l.w));
    return y;
  }
};
LLMCC_ADGEN_ENTRY inline float loss(const Net& m, const Tensor& x) { return toy::sumsq(m.forward(x)); }
}  // namespace g_nested
