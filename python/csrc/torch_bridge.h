// Between PyTorch and llmcc: the checks made once on every tensor Python passes in, llmcc views
// of torch tensors, and an arena source that makes every op output a torch tensor of its own.
//
// llmcc's kernels are CPU float32 and read dense row-major memory. Inputs that are not
// contiguous are copied to contiguous ones (the result is the same); other devices and dtypes
// are refused with an error naming the op, the argument and what was expected.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/tensor.h"

namespace llmcc_torch {

// t as a contiguous CPU float32 tensor with min_dim..max_dim dimensions (a copy when t is not
// contiguous). Throws c10::TypeError for another dtype, c10::ValueError for an undefined tensor,
// another device, or a dimension count out of range, each "[op] <name> ...".
at::Tensor checked_float(const char* op, const char* name, const at::Tensor& t, int min_dim, int max_dim);

// Target ids for cross-entropy: an int64 or int32 CPU tensor, returned as contiguous int32.
at::Tensor checked_targets(const char* op, const char* name, const at::Tensor& t);

// An llmcc handle to the memory of t (contiguous CPU float32, at most 4 dims; t stays the owner).
llmcc::Tensor view(const at::Tensor& t);

// The same memory seen as the given shape (numel must agree).
llmcc::Tensor view_as(const at::Tensor& t, const llmcc::Shape& shape);

// Uninitialised torch tensor of t's shape and an llmcc handle to it marked "zeros pending", to
// be passed as an op's adjoint: the first contribution writes it instead of adding to zeros.
struct Adjoint {
  at::Tensor torch;
  llmcc::Tensor handle;
};
Adjoint pending_adjoint(at::IntArrayRef sizes);
// Fills the zeros an adjoint still has pending (no op contributed to it).
void settle(Adjoint& adjoint);

// Arena memory from torch's CPU allocator: one byte tensor per request. After an op ran with
// this source behind its arena, output(t) gives the torch tensor that holds llmcc tensor t.
class TorchArenaSource final : public llmcc::ArenaSource {
 public:
  void* allocate(std::size_t bytes, const char* what) override;
  at::Tensor output(const llmcc::Tensor& t) const;

 private:
  std::vector<at::Tensor> buffers_;
};

// Gives llmcc's kernels torch's thread count on the calling thread (the OpenMP runtime is
// shared with torch, but a thread's count is its own and autograd may call from another one).
void match_torch_threads();

// Runs f(); an llmcc::Error it throws becomes c10::ValueError with the same message, so Python
// sees ValueError("[attention] q ...").
[[noreturn]] void rethrow_llmcc_error(const std::exception& e);

template <class F>
decltype(auto) run(F&& f) {
  match_torch_threads();
  try {
    return f();
  } catch (const llmcc::Error& e) {
    rethrow_llmcc_error(e);
  }
}

}  // namespace llmcc_torch
