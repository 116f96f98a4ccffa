// The machine's fp32 FMA peak, or its bf16 dot-product peak, measured: what MFU is relative to.
//
// Every thread runs a loop of independent fused multiply-adds on the widest vectors the build
// targets (AVX-512 when compiled with it, else AVX2 + FMA, else scalar) with enough
// accumulators to hide the FMA latency on two pipes. All threads run at once, each timing short
// bursts (0.5 ms, under a scheduler time slice) back to back; the peak is the sum over threads of
// each thread's best burst. So on a shared machine, bursts during which another process held the
// core do not lower the figure, and every burst ran while the other threads ran too (all-core
// clock speeds). If another thread was descheduled during a thread's best burst, that core may
// have boosted a little higher: the figure errs high (MFU errs low), never the other way.
#pragma once

#include <string>

#include "llmcc/runtime.h"

namespace llmcc::cli {

struct FmaPeak {
  double gflops = 0;             // all threads, best trial
  double gflops_per_thread = 0;  // gflops / threads
  int threads = 0;
  std::string isa;  // "avx512", "avx2", "scalar", "avx512_bf16 vdpbf16ps"
};

// Measures with `threads` OpenMP threads for about `seconds` in total (spread over trials).
// Bf16: the peak of vdpbf16ps (2 multiply-adds per fp32 lane) where the CPU has AVX512_BF16,
// else the fp32 FMA peak, which is what the bf16 GEMM runs on there.
FmaPeak measure_fma_peak(int threads, double seconds = 1.0, MatmulDtype dtype = MatmulDtype::Fp32);

}  // namespace llmcc::cli
