// Golden: LLMCC_ADGEN_NAME on a Tensor field, a nested module and a std::vector<Module>, an
// LLMCC_ADGEN_OPTIONAL vector (named without an index; the generated for_each_pair and
// for_each_parameter), and the Entry trait of a model-only entry.
#pragma once
#include <vector>
#include "models/toy_rules.h"
namespace g_names {
using llmcc::Tensor;
struct Layer {
  Tensor w LLMCC_ADGEN_NAME("proj.weight");  // (C, C)
  Tensor forward(const Tensor& x) const { return toy::tanh_op(toy::matmul(x, w)); }
};
struct Stack {
  int depth = 0;
  Layer in LLMCC_ADGEN_NAME("input");
  std::vector<Layer> layers LLMCC_ADGEN_NAME("h");
  bool has_out = false;
  std::vector<Layer> out LLMCC_ADGEN_OPTIONAL;  // one Layer when has_out
  Tensor forward(const Tensor& x) const {
    Tensor y = in.forward(x);
    for (const Layer& l : layers) y = l.forward(y);
    if (has_out) y = out[0].forward(y);
    return y;
  }
};
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("m") inline float loss(const Stack& m, const Tensor& x) {
  return toy::sumsq(m.forward(x));
}
}  // namespace g_names
