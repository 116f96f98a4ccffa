// Process-wide run-time settings and facts: thread count, kernel mode, memory available.
#pragma once

#include <cstddef>
#include <string>

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

// Refuses, before anything is allocated, memory that will be touched in full but cannot fit:
// throws llmcc::Error("[where] <what> needs 12.5 GiB; 7.9 GiB of memory is available") when
// `bytes` exceeds available_memory_bytes(). Does nothing when the available memory is unknown.
void check_memory_fits(const std::string& where, const std::string& what, long double bytes);

}  // namespace llmcc
