// Process-wide run-time settings and facts: thread count, kernel mode, memory available.
#pragma once

#include <cstddef>

namespace llmcc {

// Threads used by OpenMP kernels and the GEMM library.
void set_num_threads(int n);
int num_threads();

// Fast kernels by default; Reference runs every op's scalar reference kernel instead (slow,
// obviously correct: for debugging and for checking a model end to end).
enum class KernelMode { Fast, Reference };
void set_kernel_mode(KernelMode mode);
KernelMode kernel_mode();

// Bytes of memory a new allocation can use now: Linux's MemAvailable, else physical memory
// (0 when unknown).
std::size_t available_memory_bytes();

}  // namespace llmcc
