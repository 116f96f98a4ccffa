// A buffer of floats per calling thread and per use (Tag, any type naming the use), 64-byte
// aligned, that grows to the largest size asked of it and is kept: a training step allocates it
// on its first product only. Kernels that need a block of scratch beside their outputs (a bf16
// weight widened, an adapter's masked input) take it here, outside the step's arena.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>

#include "llmcc/error.h"

namespace llmcc::cpu {

// At least `floats` floats; throws llmcc::Error naming `op` and `what` when the memory cannot be
// had. The previous contents are not kept when it grows.
template <class Tag>
float* thread_buffer(std::size_t floats, const char* op, const char* what) {
  struct Buffer {
    std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};
    std::size_t floats = 0;
  };
  thread_local Buffer buf;
  if (floats > buf.floats) {
    buf.data.reset(static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64)));
    if (!buf.data) {
      buf.floats = 0;
      fail(op, "could not allocate " + std::to_string(floats * sizeof(float)) + " bytes " + what);
    }
    buf.floats = floats;
  }
  return buf.data.get();
}

}  // namespace llmcc::cpu
