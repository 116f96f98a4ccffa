// Shared declarations for the diagnostics inputs: two well-formed rules.
#pragma once

#include "llmcc/adgen.h"
#include "llmcc/tensor.h"

namespace diag {
using llmcc::Tensor;
Tensor act(const Tensor& x);
void act_pullback(const Tensor& x, const Tensor& out, const Tensor& d_out, Tensor* d_x);
float total(const Tensor& x);
void total_pullback(const Tensor& x, float out, float d_out, Tensor* d_x);
}  // namespace diag
