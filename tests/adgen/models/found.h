// Programs the random-program tester (tests/adgen/fuzz) found adgen getting wrong, reduced:
//   - an inactive float expression beside an operator lost its parentheses
//     (`l / (1.0f + k * k)` became `l / 1.0f + k * k`: a wrong loss and gradient);
//   - an entry parameter named `saved` clashed with the record parameter of `<entry>_grad`;
//   - a parameter `_s` became `_s_v`, whose adjoint `d__s_v` holds a reserved `__`;
//   - a scalar function's parameter `out` gave an adjoint `d_out` beside the backward's `d_out`;
//   - a parameter `acc` unused by a checkpointed backward was kept named (it matched
//     `llmcc::adgen::acc`), an unused-parameter error under -Werror.
#pragma once

#include <cmath>

#include "llmcc/adgen.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/scale.h"

namespace found {

using llmcc::Tensor;

struct Lin {
  Tensor w, b;  // (C, C), (C)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, w, b); }
};

struct Norm {
  Tensor w, b;  // (C), (C)
  Tensor run(const Tensor& x) const { return llmcc::layernorm(x, w, b); }
};

// A checkpointed member whose backward reads nothing of its argument's name.
struct Stepper {
  Norm wt;
  int steps = 2;  // configuration
  Tensor forward(const Tensor& acc) const {
    Tensor g = acc;
    for (int e = 0; e < steps; ++e) g = llmcc::adgen::checkpoint(wt.run(g));
    return g;
  }
};

inline float squash(float out) { return out / (1.0f + out * out) + 0.25f * out; }

struct Model {
  int V = 4;  // configuration
  Lin in;
  Stepper st;
  Tensor forward(const Tensor& x, float _s) const { return _s * st.forward(in.forward(x)); }
};

LLMCC_ADGEN_ENTRY inline float loss(const Model& m, const Tensor& saved, float _s, const llmcc::Tokens& targets) {
  const float k = 0.5f;
  float l = llmcc::cross_entropy(m.forward(saved, _s), targets, m.V, -1);
  l = l / (1.0f + k * k) - (k - 0.25f) * l;
  return squash(l);
}

}  // namespace found
