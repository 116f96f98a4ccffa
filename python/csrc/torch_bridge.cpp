#include "torch_bridge.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <omp.h>

#include "llmcc/error.h"
#include "llmcc/runtime.h"

namespace llmcc_torch {

at::Tensor checked_float(const char* op, const char* name, const at::Tensor& t, int min_dim, int max_dim) {
  TORCH_CHECK_VALUE(t.defined(), "[", op, "] ", name, " is an undefined tensor, expected a CPU float32 tensor");
  TORCH_CHECK_VALUE(t.device().is_cpu(), "[", op, "] ", name, " is on ", t.device(),
                    ", expected a CPU tensor (llmcc's kernels run on the CPU)");
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, "[", op, "] ", name, " has dtype ", t.scalar_type(),
                   ", expected float32 (llmcc's kernels are float32)");
  TORCH_CHECK_VALUE(
      t.dim() >= min_dim && t.dim() <= max_dim, "[", op, "] ", name, " has ", t.dim(), " dimensions ", t.sizes(),
      ", expected ",
      min_dim == max_dim ? std::to_string(min_dim) : std::to_string(min_dim) + " to " + std::to_string(max_dim));
  return t.is_contiguous() ? t : t.contiguous();
}

at::Tensor checked_targets(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.defined(), "[", op, "] ", name, " is an undefined tensor, expected a CPU int64 tensor");
  TORCH_CHECK_VALUE(t.device().is_cpu(), "[", op, "] ", name, " is on ", t.device(), ", expected a CPU tensor");
  TORCH_CHECK_TYPE(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt, "[", op, "] ", name, " has dtype ",
                   t.scalar_type(), ", expected int64 or int32 class indices");
  return t.to(at::kInt).contiguous();
}

llmcc::Tensor view_as(const at::Tensor& t, const llmcc::Shape& shape) {
  return llmcc::Tensor(t.data_ptr<float>(), shape);
}

llmcc::Tensor view(const at::Tensor& t) {
  switch (t.dim()) {
    case 0:
      return view_as(t, llmcc::Shape{});
    case 1:
      return view_as(t, llmcc::Shape{t.size(0)});
    case 2:
      return view_as(t, llmcc::Shape{t.size(0), t.size(1)});
    case 3:
      return view_as(t, llmcc::Shape{t.size(0), t.size(1), t.size(2)});
    default:
      return view_as(t, llmcc::Shape{t.size(0), t.size(1), t.size(2), t.size(3)});
  }
}

Adjoint pending_adjoint(at::IntArrayRef sizes) {
  Adjoint a{at::empty(sizes, at::kFloat), {}};
  a.handle = view(a.torch);
  a.handle.mark_zero_pending();
  return a;
}

void settle(Adjoint& adjoint) {
  if (adjoint.handle.zero_pending()) (void)adjoint.handle.raw();  // writes the pending zeros
}

void* TorchArenaSource::allocate(std::size_t bytes, const char* /*what*/) {
  // torch's CPU allocator aligns every block to 64 bytes (c10::gAlignment), as Arena promises.
  buffers_.push_back(at::empty({static_cast<std::int64_t>(bytes)}, at::kByte));
  return buffers_.back().data_ptr();
}

at::Tensor TorchArenaSource::output(const llmcc::Tensor& t) const {
  for (const at::Tensor& b : buffers_) {
    if (b.data_ptr() != t.address()) continue;
    std::vector<std::int64_t> sizes(t.ndim());
    for (int i = 0; i < t.ndim(); ++i) sizes[i] = t.dim(i);
    return b.narrow(0, 0, static_cast<std::int64_t>(t.nbytes())).view(at::kFloat).view(sizes);
  }
  TORCH_CHECK(false, "llmcc_torch: an op output is not in the memory given to it (a bug in llmcc_torch)");
}

void match_torch_threads() {
  const int n = at::get_num_threads();
  if (omp_get_max_threads() != n) llmcc::set_num_threads(n);
}

void rethrow_llmcc_error(const std::exception& e) { TORCH_CHECK_VALUE(false, e.what()); }

}  // namespace llmcc_torch
