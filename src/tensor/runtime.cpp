#include "llmcc/runtime.h"

#include <omp.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <atomic>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_amx.h"
#include "llmcc/error.h"

namespace llmcc {
namespace {
std::atomic<KernelMode> g_kernel_mode{KernelMode::Fast};
std::atomic<MatmulDtype> g_matmul_dtype{MatmulDtype::Fp32};
}  // namespace

void set_num_threads(int n) {
  if (n < 1) fail("runtime", "thread count must be at least 1, got " + std::to_string(n));
  // The GEMM library runs on the same OpenMP runtime, so this one call governs both.
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

namespace {
// MXCSR's flush-to-zero (results) and denormals-are-zero (operands) bits.
constexpr unsigned kFlushBits = _MM_FLUSH_ZERO_ON | 0x0040u;
void set_flush_bits(bool on) { _mm_setcsr(on ? (_mm_getcsr() | kFlushBits) : (_mm_getcsr() & ~kFlushBits)); }
}  // namespace

void set_flush_denormals(bool on) {
  set_flush_bits(on);
#pragma omp parallel
  set_flush_bits(on);
}

bool flush_denormals() { return (_mm_getcsr() & kFlushBits) == kFlushBits; }

void set_kernel_mode(KernelMode mode) { g_kernel_mode = mode; }
KernelMode kernel_mode() { return g_kernel_mode; }

void set_matmul_dtype(MatmulDtype dtype) { g_matmul_dtype = dtype; }
MatmulDtype matmul_dtype() { return g_matmul_dtype; }

const char* matmul_dtype_name(MatmulDtype dtype) { return dtype == MatmulDtype::Bf16 ? "bf16" : "fp32"; }

MatmulDtype parse_matmul_dtype(const std::string& name) {
  if (name == "fp32") return MatmulDtype::Fp32;
  if (name == "bf16") return MatmulDtype::Bf16;
  fail("dtype", "unknown dtype '" + name + "' (expected fp32 or bf16)");
}

std::string matmul_kernel_name() {
  return matmul_dtype() == MatmulDtype::Bf16 ? cpu::gemm_bf16_kernel_name() : cpu::gemm_kernel_name();
}

std::size_t available_memory_bytes() {
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f) != nullptr)
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    std::fclose(f);
    if (kib > 0) return static_cast<std::size_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
}

void check_memory_fits(const std::string& where, const std::string& what, long double bytes) {
  const std::size_t available = available_memory_bytes();
  if (available == 0 || bytes <= static_cast<long double>(available)) return;
  const auto gib = [](long double b) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(1) << static_cast<double>(b / (1024.0L * 1024.0L * 1024.0L)) << " GiB";
    return s.str();
  };
  fail(where,
       what + " needs " + gib(bytes) + "; " + gib(static_cast<long double>(available)) + " of memory is available");
}

}  // namespace llmcc
