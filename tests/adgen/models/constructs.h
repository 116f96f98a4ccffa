// One model exercising every construct of subset v1 at once: a counted for over a module
// vector with if/else inside, an if/else on a config field, reassigned tensor locals, a free
// differentiable function, tensor operators (+, -, unary -, *, float * tensor, float - tensor),
// a rule with saved buffers (norm_fwd + NormSaved), a tied parameter (w_shared used twice),
// float arithmetic on the loss, a float argument the gradient flows to, and an inactive tensor
// computed from token ids.
#pragma once

#include <cmath>
#include <vector>

#include "llmcc/ops/mul.h"
#include "llmcc/ops/scale.h"
#include "llmcc/ops/sub.h"
#include "models/toy_rules.h"

namespace cons {

using llmcc::Tensor;

struct Lin {
  Tensor w;  // (C, C)
  Tensor forward(const Tensor& x) const { return toy::matmul(x, w); }
};

// A free differentiable function: reassignment and `return op(...)`.
inline Tensor mix(const Tensor& a, const Tensor& b) {
  Tensor y = a + b;
  y = toy::tanh_op(y);
  y = y - b;        // Tensor - Tensor: the sub rule
  return -(y * a);  // unary minus: the neg rule
}

struct Net {
  bool use_norm = true;  // configuration
  float gain = 2.0f;     // configuration float: no gradient
  Tensor w_shared;       // (C, C), used twice (weight tying)
  std::vector<Lin> layers;
  Lin head;

  Tensor forward(const Tensor& x, const llmcc::Tokens& ids) const {
    const Tensor hot = toy::one_hot(ids, static_cast<int>(x.dim(1)));  // inactive: from token ids
    Tensor y = toy::matmul(x, w_shared) + toy::matmul(hot, head.w);
    const int n = static_cast<int>(layers.size());
    for (int i = 0; i < n; ++i) {
      if (i % 2 == 0) {
        y = layers[i].forward(y);
      } else {
        Tensor t = toy::tanh_op(layers[i].forward(y));
        y = y + t;
      }
    }
    Tensor z;  // declared without a value, assigned in each branch
    if (use_norm)
      z = toy::norm(y);
    else
      z = y * gain;  // Tensor * float: the scale rule
    y = 2.0f * z;    // float * Tensor: the scale rule
    y = mix(y, toy::matmul(y, w_shared));
    return head.forward(y);
  }
};

LLMCC_ADGEN_ENTRY inline float loss(const Net& net, const Tensor& x, const llmcc::Tokens& ids, float s) {
  float a = toy::sumsq(net.forward(x, ids));
  const float b = toy::sumsq(toy::scale_by(x, s)) + 0.5f * toy::sumsq(s - x);  // float - Tensor: rsub
  float c = a * 0.5f + b / (4.0f + a);
  c -= 0.25f * b;
  const float d = -c;
  return a * a - d;
}

}  // namespace cons
