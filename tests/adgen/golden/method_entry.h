// Golden: the entry is a const member function; a float argument gets an adjoint.
#pragma once
#include "llmcc/ops/scale.h"
#include "models/toy_rules.h"
namespace g_method {
using llmcc::Tensor;
struct Head {
  Tensor w;  // (C, C)
  LLMCC_ADGEN_ENTRY float loss(const Tensor& x, float temperature) const {
    return toy::sumsq(temperature * toy::matmul(x, w));
  }
};
}  // namespace g_method
