// Arena: bump allocation for one training step's activations, saved values and adjoints.
//
// A step allocates from the current arena (set with ArenaScope), and the trainer calls reset()
// after the step, so a steady-state step allocates nothing from the heap. The capacity is fixed
// at construction; a request beyond it throws llmcc::Error naming what asked and how much was
// in use, never a crash. Pages are only touched when used, so a generous capacity costs address
// space, not memory.
#pragma once

#include <cstddef>

#include "llmcc/tensor.h"

namespace llmcc {

// Where an arena's memory comes from when the arena does not own a block: an embedding hands
// every request to its own allocator (the PyTorch extension makes each op output a torch tensor
// this way, so no output is copied).
class ArenaSource {
 public:
  virtual ~ArenaSource() = default;
  // At least `bytes` of uninitialised memory aligned to Arena::kAlignment, alive as long as the
  // source needs it; throws llmcc::Error when it cannot.
  virtual void* allocate(std::size_t bytes, const char* what) = 0;
};

class Arena {
 public:
  static constexpr std::size_t kAlignment = 64;  // one cache line; also AVX-512 width

  explicit Arena(std::size_t capacity_bytes);
  // An arena without a block of its own: every allocation is the source's (which must outlive
  // the arena). reset() forgets the count, not the memory; capacity() is 0 and owns() is false.
  explicit Arena(ArenaSource& source) : source_(&source) {}
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Uninitialised, kAlignment-aligned memory; `what` names the requester in errors.
  void* allocate(std::size_t bytes, const char* what);
  // A tensor of the given shape; contents uninitialised.
  Tensor tensor(const Shape& shape, const char* what, DType dtype = DType::F32);
  // A tensor of the given shape filled with zeros.
  Tensor zeros(const Shape& shape, const char* what, DType dtype = DType::F32);

  // Frees everything at once; the high-water mark is kept.
  void reset() { used_ = 0; }
  // Fills the memory in use with 0xFF bytes (a NaN in every float) and frees it, so a handle
  // still pointing into it reads NaN instead of plausible stale values.
  void poison_and_reset();
  // Whether p points into this arena's memory (in use or not).
  bool owns(const void* p) const {
    const auto* c = static_cast<const unsigned char*>(p);
    return c >= base_ && c < base_ + capacity_;
  }

  std::size_t capacity() const { return capacity_; }
  std::size_t used() const { return used_; }
  std::size_t high_water() const { return high_water_; }

 private:
  unsigned char* base_ = nullptr;
  ArenaSource* source_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::size_t high_water_ = 0;
};

// Makes `arena` the current arena of this thread for the scope's lifetime (scopes nest).
class ArenaScope {
 public:
  explicit ArenaScope(Arena& arena);
  ~ArenaScope();
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  Arena* previous_;
};

// The current arena; throws llmcc::Error naming `op` when no ArenaScope is active.
Arena& current_arena(const char* op);

// Shorthands used by op front ends: uninitialised / zeroed tensors from the current arena.
Tensor new_tensor(const Shape& shape, const char* op);
Tensor new_zeros(const Shape& shape, const char* op);

}  // namespace llmcc
