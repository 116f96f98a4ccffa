// The Python module llmcc_torch._C: importing it registers the `llmcc` operators (ops.cpp) with
// PyTorch's dispatcher and adds the block functions (blocks.cpp) and AdamW's step (optim.cpp).
// pybind11 and the at::Tensor caster. Not torch/extension.h: its torch/all.h (the C++ frontend:
// modules, optimizers, data loaders), which nothing here uses, takes most of a compile.
#include <torch/csrc/utils/pybind.h>

#include <string>

#include "llmcc/runtime.h"

namespace llmcc_torch {
void register_blocks(pybind11::module_& m);
void register_optim(pybind11::module_& m);
}  // namespace llmcc_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "llmcc's kernels and adgen-generated block backwards for PyTorch (CPU, float32)";
  llmcc_torch::register_blocks(m);
  llmcc_torch::register_optim(m);
  m.def(
      "matmul_kernel_name", [] { return llmcc::matmul_kernel_name(); },
      "The GEMM micro-kernel llmcc's linear layers run on this CPU.");
}
