#include "llmcc/arena.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "llmcc/error.h"
#include "tensor/large_alloc.h"

namespace llmcc {
namespace {

thread_local Arena* g_current_arena = nullptr;

std::string mib(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

Arena::Arena(std::size_t capacity_bytes) {
  capacity_ = (capacity_bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (capacity_ == 0) return;
  base_ = static_cast<unsigned char*>(allocate_large(capacity_));
  if (base_ == nullptr) fail("arena", "could not reserve " + mib(capacity_));
}

Arena::~Arena() { std::free(base_); }

void* Arena::allocate(std::size_t bytes, const char* what) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (source_ != nullptr) {
    void* p = source_->allocate(rounded, what);
    used_ += rounded;
    if (used_ > high_water_) high_water_ = used_;
    return p;
  }
  if (rounded > capacity_ - used_) {
    fail("arena", std::string("request of ") + mib(bytes) + " for '" + what + "' exceeds the capacity: " + mib(used_) +
                      " of " + mib(capacity_) + " in use; construct the Arena with a larger capacity");
  }
  void* p = base_ + used_;
  used_ += rounded;
  if (used_ > high_water_) high_water_ = used_;
  return p;
}

Tensor Arena::tensor(const Shape& shape, const char* what, DType dtype) {
  return Tensor(allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype), what), shape, dtype);
}

Tensor Arena::zeros(const Shape& shape, const char* what, DType dtype) {
  Tensor t = tensor(shape, what, dtype);
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

void Arena::poison_and_reset() {
  if (used_ > 0 && source_ == nullptr) std::memset(base_, 0xFF, used_);
  used_ = 0;
}

ArenaScope::ArenaScope(Arena& arena) : previous_(g_current_arena) { g_current_arena = &arena; }
ArenaScope::~ArenaScope() { g_current_arena = previous_; }

Arena& current_arena(const char* op) {
  if (g_current_arena == nullptr) {
    fail(op, "no arena is active for the output; wrap the step in llmcc::ArenaScope");
  }
  return *g_current_arena;
}

Tensor new_tensor(const Shape& shape, const char* op) { return current_arena(op).tensor(shape, op); }
Tensor new_zeros(const Shape& shape, const char* op) { return current_arena(op).zeros(shape, op); }

}  // namespace llmcc
