// Golden: fan-out. A residual uses x twice and a tied weight w is used twice.
#pragma once
#include "models/toy_rules.h"
namespace g_fanout {
using llmcc::Tensor;
struct Tied {
  Tensor w;  // (C, C)
  Tensor forward(const Tensor& x) const { return x + toy::matmul(toy::matmul(x, w), w); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Tied& m, const Tensor& x) { return toy::sumsq(m.forward(x)); }
}  // namespace g_fanout
