// Process-wide run-time settings and facts: thread count, kernel mode, memory available.
#pragma once

#include <cstddef>
#include <string>

namespace llmcc {

// Threads used by OpenMP kernels and the GEMM library.
void set_num_threads(int n);
int num_threads();

// Subnormal floats (magnitudes below 1.2e-38) read and written as zero, on the calling thread and
// every thread of the OpenMP team (threads started later inherit the setting from the thread that
// starts them). x86 CPUs compute with subnormal operands through microcode, 10 to 100 times slower
// per instruction: a fine-tuned model whose softmax puts probabilities below 1e-38 on most of the
// vocabulary fills its gradients with them, and a training step of a small Llama went from 72 to
// over 800 ms. Flushing changes only values no fp32 training result depends on. On by default in
// the command line and in every training loop (llmcc::TrainLoop).
void set_flush_denormals(bool on);
bool flush_denormals();  // the calling thread's setting

// Fast kernels by default; Reference runs every op's scalar reference kernel instead (slow,
// obviously correct: for debugging and for checking a model end to end).
enum class KernelMode { Fast, Reference };
void set_kernel_mode(KernelMode mode);
KernelMode kernel_mode();

// The operand precision of the matrix products (every linear layer's forward and backward
// GEMMs). Fp32 by default. Bf16 rounds both operands of each product to bfloat16 and sums the
// products in fp32 (mixed precision): weights, gradients, the optimizer and every other op stay
// fp32. On CPUs with AVX512_BF16 the products run on vdpbf16ps, and so do causal attention's
// (its softmax stays fp32); elsewhere bf16 still works, on the fp32 kernel (matmul_kernel_name
// says which), with attention in fp32. Reference kernel mode ignores it.
enum class MatmulDtype { Fp32, Bf16 };
void set_matmul_dtype(MatmulDtype dtype);
MatmulDtype matmul_dtype();
// "fp32" or "bf16"; parse_matmul_dtype throws llmcc::Error naming the accepted values.
const char* matmul_dtype_name(MatmulDtype dtype);
MatmulDtype parse_matmul_dtype(const std::string& name);
// The GEMM kernel the current dtype runs on, e.g. "avx512_bf16 14x32 (vdpbf16ps)".
std::string matmul_kernel_name();

// The cache blocking of llmcc's packed GEMM (the default GEMM backend; docs/perf.md, "GEMM
// blocking and autotuning"). It sets the speed, and also the K slices each element of C sums in
// order: runs with the same blocking, instruction set, compiler and thread count give the same
// bits; another blocking rounds differently (within fp32 accuracy).
struct GemmBlocking {
  int kc = 0;        // K values per slice (fp32; a slice of vdpbf16ps products holds 4 times as many)
  int mc = 0;        // rows of C per packed op(A) block in the blocked order: a multiple of MR
  int nc = 0;        // columns of C per packed op(B) block: a multiple of NR
  int stream_a = 0;  // floats of the streaming order's packed op(A) slice (its rows x KC)
  // Products with at most this many rows of C take the streaming order (its op(A) slice of all
  // rows in stream_a), wider ones the blocked order; 0 to 512. 512 is the built-in limit, so a
  // blocking written with the other four fields alone keeps it.
  int stream_rows = 512;
  bool operator==(const GemmBlocking&) const = default;
};
// How the blocking is chosen, once, before the first product. Auto: this CPU's cached
// measurement, else measure now (about two seconds, one thread) and cache it; Off: the blocking
// built in for the instruction set; Redo: measure now and overwrite the cache. The default is
// $LLMCC_GEMM_TUNE (auto, off or redo), else Auto. Setting a mode drops any choice made so far.
enum class GemmTune { Auto, Off, Redo };
void set_gemm_tune(GemmTune mode);
// "auto", "off" or "redo"; anything else throws llmcc::Error naming the accepted values.
GemmTune parse_gemm_tune(const std::string& name);
// The blocking in use (chosen now if it was not yet) and where it came from, e.g.
// "measured now in 1.2 s, saved to /root/.cache/llmcc/tuning/gemm-3f2a....txt".
struct GemmBlockingInfo {
  GemmBlocking blocking;
  std::string source;
  std::string cpu;  // the CPU it is for: model name and cache sizes
};
GemmBlockingInfo gemm_blocking_info();
// Use this blocking from now on (a resumed run's, tests, benchmarks); throws llmcc::Error naming
// a field that no packed GEMM of this build can use. `source` is what gemm_blocking_info says.
void set_gemm_blocking(const GemmBlocking& blocking, const std::string& source = "set by the program");
// "kc=384 mc=240 nc=4096 stream_a=66048 stream_rows=512", and back (llmcc::Error unless kc, mc,
// nc and stream_a are there; a text without stream_rows, as runs before it wrote, means 512).
std::string to_string(const GemmBlocking& blocking);
GemmBlocking parse_gemm_blocking(const std::string& text);
// The blocking built in for this build's instruction set (what Off uses).
GemmBlocking builtin_gemm_blocking();
// The file Auto and Redo read and write for this CPU and build: $LLMCC_TUNE_CACHE, else
// $XDG_CACHE_HOME/llmcc/tuning, else ~/.cache/llmcc/tuning, then gemm-<hash of the CPU and
// build>.txt (empty when none of those is set).
std::string gemm_tune_cache_path();

// A measured peak of this CPU (kernels/cpu/fma_peak.cpp): all threads running independent FMAs
// (fp32) or the bf16 GEMM's vdpbf16ps dot products, each thread's best 0.5 ms burst summed.
struct FmaPeak {
  double gflops = 0;             // all threads, best trial
  double gflops_per_thread = 0;  // gflops / threads
  int threads = 0;
  std::string isa;  // "avx512", "avx2", "scalar", "avx512_bf16 vdpbf16ps", "amx_bf16 tdpbf16ps"
};
// Measures with `threads` OpenMP threads for about `seconds` in total (spread over trials).
// Bf16: the peak of what the bf16 GEMM runs on: AMX's tdpbf16ps where the CPU has AMX-BF16 (and
// Linux grants the tiles), else vdpbf16ps (2 multiply-adds per fp32 lane) where it has
// AVX512_BF16, else the fp32 FMA peak.
FmaPeak measure_fma_peak(int threads, double seconds = 1.0, MatmulDtype dtype = MatmulDtype::Fp32);

// The matrix-product dtype for a --dtype value ("fp32", "bf16" or "auto") on this CPU, and a line
// for the user when there is something to say, else empty: auto's choice and why, or how much
// slower bf16 is expected to run where it is slower than fp32. bf16 pays only with AVX512_BF16
// and a dot-product peak at least 1.25x the fp32 FMA peak (the bf16 GEMM converts its operands
// while packing, so it gets less than the peak ratio); the peaks are measured once per process
// (about 0.2 s). Throws llmcc::Error for another name.
struct MatmulDtypeChoice {
  MatmulDtype dtype = MatmulDtype::Fp32;
  std::string note;
};
MatmulDtypeChoice choose_matmul_dtype(const std::string& name);

// Bytes of memory a new allocation can use now: Linux's MemAvailable, else physical memory
// (0 when unknown).
std::size_t available_memory_bytes();

// Refuses, before anything is allocated, memory that will be touched in full but cannot fit:
// throws llmcc::Error("[where] <what> needs 12.5 GiB; 7.9 GiB of memory is available") when
// `bytes` exceeds available_memory_bytes(). Does nothing when the available memory is unknown.
void check_memory_fits(const std::string& where, const std::string& what, long double bytes);

}  // namespace llmcc
