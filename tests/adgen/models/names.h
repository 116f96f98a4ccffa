// User names that generated code also uses: module fields `m`, `f`, `prefix`, `i`, `visit`, `r`;
// parameters `f`, `_s`, `d_x` beside `x`, `self`, `t0`, `d_out`; locals `_g`, `_scratch`, `_c`,
// `_a0`, `_value`; a loop variable `d_self`. The generated code must compile and be right.
#pragma once

#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/scale.h"

namespace nm {

using llmcc::Tensor;

struct Lin {
  Tensor m, f;  // (C, C), (C): weight and bias named like the mirror's parameters
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, m, f); }
};

struct Blk {
  Lin prefix, visit, r;
  std::vector<Lin> i;
  Tensor forward(const Tensor& self, float _s) const {
    Tensor _g = self;
    for (int d_self = 0; d_self < static_cast<int>(i.size()); ++d_self) _g = _g + i[d_self].forward(_g);
    Tensor _scratch = prefix.forward(_g);
    Tensor _c = visit.forward(llmcc::gelu(_scratch));
    Tensor _a0 = _s * r.forward(_c);
    Tensor _value = _a0 + _g;
    return _value;
  }
};

inline Tensor twice(const Tensor& x, const Tensor& d_x, const Tensor& t0) { return x + d_x + t0; }

struct Top {
  Blk f;
  std::vector<Blk> m;
  Lin head;  // (V, C)
};

LLMCC_ADGEN_ENTRY inline float loss(const Top& self, const Tensor& x, const Tensor& d_x, float f,
                                    const llmcc::Tokens& d_out) {
  Tensor t0 = self.f.forward(x, f);
  for (const Blk& _r0 : self.m) t0 = _r0.forward(t0, f);
  Tensor y = twice(t0, d_x, x);
  return llmcc::cross_entropy(self.head.forward(y), d_out, static_cast<int>(self.head.m.dim(0)), -1);
}

}  // namespace nm
