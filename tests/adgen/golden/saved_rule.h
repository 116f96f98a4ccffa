// Golden: a rule whose backward needs saved buffers (norm_fwd fills NormSaved).
#pragma once
#include "models/toy_rules.h"
namespace g_saved {
using llmcc::Tensor;
LLMCC_ADGEN_ENTRY inline float loss(const Tensor& x) { return toy::sumsq(toy::norm(x)); }
}  // namespace g_saved
