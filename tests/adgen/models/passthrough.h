// Residual blocks written with pass-through locals (`Tensor h = x; h = h + f(h); return h;`) in
// the arrangements where an adjoint leaving a callee must not take over the callee's scratch
// memory: after a rule and an unrelated callee, with the input fanned out, nested, in a loop, a
// member function stepping a local, an adjoint pointer passed down two calls, and each of them
// with a checkpointed call.
#pragma once

#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/scale.h"

namespace pt {

using llmcc::Tensor;

struct Lin {
  Tensor w, b;  // (OC, C), (OC)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, w, b); }
};

struct Mlp {
  Lin fc, proj;  // C -> 2C -> C
  Tensor forward(const Tensor& x) const { return proj.forward(llmcc::gelu(fc.forward(x))); }
};

struct ResBlock {
  Mlp mlp;
  Tensor forward(const Tensor& x) const {
    Tensor h = x;
    h = h + mlp.forward(h);
    return h;
  }
};

struct Stepper {
  int steps = 2;  // configuration
  Lin l;          // (C, C)
  Tensor step(const Tensor& x) const { return llmcc::gelu(l.forward(x)); }
  Tensor forward(const Tensor& x) const {
    Tensor z = x;
    for (int i = 0; i < steps; ++i) z = step(z);
    return z;
  }
};

// Passes its argument's adjoint pointer down to the stepper (a pass-through when steps is 0),
// whose d_out lives in this function's scratch memory: the stepper must not bind the outer
// caller's adjoint to it.
struct Scaler {
  float k = 0.75f;  // configuration
  Stepper st;
  Tensor run(const Tensor& hid) const { return k * st.forward(hid); }
};

struct Net {
  int mode = 0;    // configuration: which arrangement (0-5)
  int ckpt = -1;   // configuration: which call to checkpoint (-1: none)
  int V = 5;       // configuration: classes of the loss
  Lin in;          // (C, C)
  ResBlock a, b;
  std::vector<ResBlock> h;
  Stepper st;
  Scaler sc;
  Mlp m2;
  Lin head;        // (V, C)

  Tensor forward(const Tensor& x) const {
    Tensor y = llmcc::gelu(in.forward(x));  // (N, C)
    if (mode == 0) {
      // after a rule, then an unrelated callee
      if (ckpt == 0)
        y = llmcc::adgen::checkpoint(a.forward(y));
      else
        y = a.forward(y);
      y = m2.forward(y);
    } else if (mode == 1) {
      // the input fanned out to two blocks
      if (ckpt == 0)
        y = llmcc::adgen::checkpoint(a.forward(y)) + b.forward(y);
      else
        y = a.forward(y) + b.forward(y);
    } else if (mode == 2) {
      // nested: block(block(x)), block(mlp(x))
      if (ckpt == 0)
        y = a.forward(llmcc::adgen::checkpoint(a.forward(y)));
      else
        y = a.forward(a.forward(y));
      y = b.forward(m2.forward(y));
    } else if (mode == 3) {
      // a loop of blocks, one of them (not the last) checkpointed
      for (int i = 0; i < static_cast<int>(h.size()); ++i) {
        if (i == ckpt)
          y = llmcc::adgen::checkpoint(h[i].forward(y));
        else
          y = h[i].forward(y);
      }
    } else if (mode == 5) {
      // an adjoint pointer passed down two calls, the inner one a pass-through
      if (ckpt == 0)
        y = a.forward(y) + llmcc::adgen::checkpoint(sc.run(y));
      else
        y = a.forward(y) + sc.run(y);
    } else {
      // a member function stepping a local: Tensor z = x; for (...) z = step(z); return z;
      if (ckpt == 0)
        y = llmcc::adgen::checkpoint(st.forward(y));
      else
        y = st.forward(y);
    }
    return head.forward(y);
  }
};

LLMCC_ADGEN_ENTRY inline float loss(const Net& net, const Tensor& x, const llmcc::Tokens& targets) {
  return llmcc::cross_entropy(net.forward(x), targets, net.V, -1);
}

}  // namespace pt
