#include "llmcc/runtime.h"

#include <omp.h>

#include <atomic>

#include "llmcc/error.h"

namespace llmcc {
namespace {
std::atomic<KernelMode> g_kernel_mode{KernelMode::Fast};
}

void set_num_threads(int n) {
  if (n < 1) fail("runtime", "thread count must be at least 1, got " + std::to_string(n));
  // The GEMM library runs on the same OpenMP runtime, so this one call governs both.
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

void set_kernel_mode(KernelMode mode) { g_kernel_mode = mode; }
KernelMode kernel_mode() { return g_kernel_mode; }

}  // namespace llmcc
