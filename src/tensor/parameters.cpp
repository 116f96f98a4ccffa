#include "llmcc/parameters.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "llmcc/arena.h"
#include "llmcc/error.h"
#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "tensor/large_alloc.h"

namespace llmcc {
namespace {
constexpr std::size_t kAlignFloats = Arena::kAlignment / sizeof(float);
}

void ParameterStore::FreeDeleter::operator()(float* p) const {
  if (owned) std::free(p);
}

void ParameterStore::relocate(float* memory, bool copy_values) {
  if (size_ == 0) return;
  if (memory == nullptr) {
    float* own = static_cast<float*>(allocate_large(size_ * sizeof(float)));
    if (own == nullptr) fail("parameters", "could not allocate " + std::to_string(size_) + " floats");
    std::memcpy(own, data_.get(), size_ * sizeof(float));
    data_ = std::unique_ptr<float, FreeDeleter>(own, FreeDeleter{true});
    return;
  }
  if (reinterpret_cast<std::uintptr_t>(memory) % Arena::kAlignment != 0)
    fail("parameters", "relocate: the memory is not " + std::to_string(Arena::kAlignment) + "-byte aligned");
  if (copy_values && memory != data_.get()) std::memcpy(memory, data_.get(), size_ * sizeof(float));
  data_ = std::unique_ptr<float, FreeDeleter>(memory, FreeDeleter{false});
}

ParameterStore::ParameterStore(const std::vector<ParameterInfo>& params) : params_(params) {
  offsets_.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Shape& shape = params[i].shape;
    if (shape.ndim() == 0 || shape.numel() == 0) {
      fail("parameters", "parameter " + std::to_string(i) + " ('" + params[i].name + "') has empty shape " +
                             shape.str() + "; declare every parameter with its shape first");
    }
    offsets_.push_back(size_);
    size_ += (static_cast<std::size_t>(shape.numel()) + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }
  if (size_ == 0) return;
  // zero() touches every page, so a store that cannot fit is refused here, not paged out.
  check_memory_fits("parameters", std::to_string(params.size()) + " tensors of " + std::to_string(size_) + " floats",
                    static_cast<long double>(size_) * sizeof(float));
  data_.reset(static_cast<float*>(allocate_large(size_ * sizeof(float))));
  if (!data_) fail("parameters", "could not allocate " + std::to_string(size_) + " floats");
  zero();
}

void ParameterStore::release_values(std::size_t i) {
  const long page = sysconf(_SC_PAGESIZE);
  const auto begin = reinterpret_cast<std::uintptr_t>(data_.get() + offsets_.at(i));
  const auto end = begin + static_cast<std::uintptr_t>(params_.at(i).shape.numel()) * sizeof(float);
  const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  // Private anonymous memory: the released pages are zero-filled if touched again.
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

Tensor ParameterStore::tensor(std::size_t i) const { return Tensor(data_.get() + offsets_.at(i), params_.at(i).shape); }

std::int64_t ParameterStore::parameter_count() const {
  std::int64_t n = 0;
  for (const ParameterInfo& p : params_) n += p.shape.numel();
  return n;
}

ParameterStore::BadValues ParameterStore::bad_values(bool negative_too) const {
  BadValues out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const float* x = data_.get() + offsets_[i];
    const std::int64_t n = params_[i].shape.numel();
    for (std::int64_t k = 0; k < n; ++k) {
      if (std::isfinite(x[k]) && !(negative_too && x[k] < 0)) continue;
      if (out.count++ == 0) {
        out.first_tensor = params_[i].name;
        out.first_value = x[k];
      }
    }
  }
  return out;
}

void ParameterStore::zero() {
  LLMCC_PROFILE("store.zero");  // the gradient zeroing of a training step
  if (size_ > 0) std::memset(data_.get(), 0, size_ * sizeof(float));
}

}  // namespace llmcc
