// Golden: a module whose member function calls one rule.
#pragma once
#include "models/toy_rules.h"
namespace g_rule {
using llmcc::Tensor;
struct Linear {
  Tensor w;  // (C, OC)
  Tensor forward(const Tensor& x) const { return toy::matmul(x, w); }
};
LLMCC_ADGEN_ENTRY inline float loss(const Linear& m, const Tensor& x) { return toy::sumsq(m.forward(x)); }
}  // namespace g_rule
