// A 3-level model for adgen's execution and counting tests:
// loss -> Model -> std::vector<Block> -> Linear -> matmul / tanh_op, with a residual (+).
#pragma once

#include <vector>

#include "models/toy_rules.h"

namespace mlp {

using llmcc::Tensor;

struct Linear {
  Tensor w;  // (C, OC)
  Tensor forward(const Tensor& x) const { return toy::matmul(x, w); }
};

struct Block {
  Linear fc1, fc2;
  Tensor forward(const Tensor& x) const {
    Tensor h = toy::tanh_op(fc1.forward(x));  // (N, 4C)
    return x + fc2.forward(h);                // (N, C)
  }
};

struct Model {
  int n_layer = 2;  // configuration: no gradient
  Linear in;
  std::vector<Block> h;
  Tensor forward(const Tensor& x) const {
    Tensor y = in.forward(x);
    for (const Block& b : h) y = b.forward(y);
    return y;
  }
};

LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return toy::sumsq(m.forward(x)); }

}  // namespace mlp
