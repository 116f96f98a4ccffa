// The data of an adjoint for a pullback whose fast kernel can either add its contribution or
// write it (the first contribution to an adgen adjoint, whose zeros are pending).
#pragma once

#include "llmcc/runtime.h"
#include "llmcc/tensor.h"

namespace llmcc {

// d's data, or null for a null d. *overwrite is set when the fast kernel must write every
// element instead of adding (d's zeros were pending; the storage holds garbage). Reference
// kernels always add: their pending zeros are filled here.
inline float* adjoint_data(Tensor* d, bool* overwrite) {
  *overwrite = d != nullptr && kernel_mode() != KernelMode::Reference && d->take_zero_pending();
  return d ? d->f32() : nullptr;
}

}  // namespace llmcc
