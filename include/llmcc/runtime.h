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

// The operand precision of the matrix products (every linear layer's forward and backward
// GEMMs). Fp32 by default. Bf16 rounds both operands of each product to bfloat16 and sums the
// products in fp32 (mixed precision): weights, gradients, the optimizer and every other op stay
// fp32. On CPUs with AVX512_BF16 the products run on vdpbf16ps; elsewhere bf16 still works, on
// the fp32 kernel (matmul_kernel_name says which). Reference kernel mode ignores it.
enum class MatmulDtype { Fp32, Bf16 };
void set_matmul_dtype(MatmulDtype dtype);
MatmulDtype matmul_dtype();
// "fp32" or "bf16"; parse_matmul_dtype throws llmcc::Error naming the accepted values.
const char* matmul_dtype_name(MatmulDtype dtype);
MatmulDtype parse_matmul_dtype(const std::string& name);
// The GEMM kernel the current dtype runs on, e.g. "avx512_bf16 14x32 (vdpbf16ps)".
std::string matmul_kernel_name();

// Bytes of memory a new allocation can use now: Linux's MemAvailable, else physical memory
// (0 when unknown).
std::size_t available_memory_bytes();

// Refuses, before anything is allocated, memory that will be touched in full but cannot fit:
// throws llmcc::Error("[where] <what> needs 12.5 GiB; 7.9 GiB of memory is available") when
// `bytes` exceeds available_memory_bytes(). Does nothing when the available memory is unknown.
void check_memory_fits(const std::string& where, const std::string& what, long double bytes);

}  // namespace llmcc
