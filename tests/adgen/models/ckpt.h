// The counting model with a counted loop, where one chosen block is checkpointed: its forward
// runs again inside the backward and only its input is saved.
#pragma once

#include <vector>

#include "models/toy_rules.h"

namespace ckpt {

using llmcc::Tensor;

struct Linear {
  Tensor w;  // (C, OC)
  Tensor forward(const Tensor& x) const { return toy::matmul(x, w); }
};

struct Block {
  Linear fc1, fc2;
  Tensor forward(const Tensor& x) const {
    Tensor h = toy::tanh_op(fc1.forward(x));  // (N, 2C)
    return x + fc2.forward(h);                // (N, C)
  }
};

struct Model {
  int checkpoint_layer = -1;  // configuration: which block to checkpoint (-1: none)
  std::vector<Block> h;
  Tensor forward(const Tensor& x) const {
    Tensor y = x;
    for (int i = 0; i < static_cast<int>(h.size()); ++i) {
      if (i == checkpoint_layer)
        y = llmcc::adgen::checkpoint(h[i].forward(y));
      else
        y = h[i].forward(y);
    }
    return y;
  }
};

LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& x) { return toy::sumsq(m.forward(x)); }

}  // namespace ckpt
