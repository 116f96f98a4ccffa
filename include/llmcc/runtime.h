// Process-wide run-time settings: thread count and kernel mode.
#pragma once

namespace llmcc {

// Threads used by OpenMP kernels and the GEMM library.
void set_num_threads(int n);
int num_threads();

// Fast kernels by default; Reference runs every op's scalar reference kernel instead (slow,
// obviously correct: for debugging and for checking a model end to end).
enum class KernelMode { Fast, Reference };
void set_kernel_mode(KernelMode mode);
KernelMode kernel_mode();

}  // namespace llmcc
