// The machine's fp32 FMA peak, or its bf16 dot-product peak, measured: what MFU is relative to,
// and what --dtype auto compares.
//
// Every thread runs a loop of independent fused multiply-adds on the widest vectors the build
// targets (AVX-512 when compiled with it, else AVX2 + FMA, else scalar) with enough
// accumulators to hide the FMA latency on two pipes. All threads run at once, each timing short
// bursts (0.5 ms, under a scheduler time slice) back to back; the peak is the sum over threads of
// each thread's best burst. So on a shared machine, bursts during which another process held the
// core do not lower the figure, and every burst ran while the other threads ran too (all-core
// clock speeds). If another thread was descheduled during a thread's best burst, that core may
// have boosted a little higher: the figure errs high (MFU errs low), never the other way.
#include "llmcc/runtime.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/gemm_amx.h"
#include "llmcc/error.h"

namespace llmcc {
namespace {

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
constexpr const char* kIsa = "avx512";
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
// (Not _mm512_reduce_add_ps: GCC 12 warns about an uninitialised value inside it.)
inline float vsum(Vec a) {
  alignas(64) float t[16];
  _mm512_store_ps(t, a);
  float s = 0;
  for (float x : t) s += x;
  return s;
}
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int kLanes = 8;
constexpr const char* kIsa = "avx2";
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vsum(Vec a) {
  alignas(32) float t[8];
  _mm256_store_ps(t, a);
  float s = 0;
  for (float x : t) s += x;
  return s;
}
#else
using Vec = float;
constexpr int kLanes = 1;
constexpr const char* kIsa = "scalar";
inline Vec vset(float x) { return x; }
inline Vec vfma(Vec a, Vec b, Vec c) { return a * b + c; }
inline float vsum(Vec a) { return a; }
#endif

// Independent accumulators per thread: FMA latency (4 cycles on current x86) times two FMA
// pipes needs at least 8 in flight. They must fit the register file with the two constants:
// 16 of the 32 zmm registers with AVX-512, 12 of the 16 ymm registers otherwise (16 there
// spill, which halves the loop's rate).
#if defined(__AVX512F__)
constexpr int kAcc = 16;
#else
constexpr int kAcc = 12;
#endif
constexpr double kFlopsPerIter = 2.0 * kLanes * kAcc;

// `iters` rounds of kAcc independent FMAs; acc -> acc * m + a converges to a / (1 - m) = 1, so
// values stay normal. The sum is returned so the compiler cannot drop the loop.
__attribute__((noinline)) float fma_loop(std::int64_t iters, float seed) {
  Vec acc[kAcc];
  for (int k = 0; k < kAcc; ++k) acc[k] = vset(seed + 1e-3f * static_cast<float>(k));
  const Vec m = vset(0.9999999f), a = vset(1e-7f);
  for (std::int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAcc; ++k) acc[k] = vfma(acc[k], m, a);
  }
  Vec s = acc[0];
  for (int k = 1; k < kAcc; ++k) s = s + acc[k];
  return vsum(s);
}

#if defined(__AVX512BF16__)
// The bf16 peak: kAcc independent vdpbf16ps per round, each 32 bf16 multiply-adds (64 flops)
// into 16 fp32 lanes, the instruction the bf16 GEMM's micro-kernel runs. The products
// (2^-20 each) keep the sums small and normal for any burst length.
constexpr double kBf16FlopsPerIter = 2.0 * 2 * kLanes * kAcc;
__attribute__((noinline)) float bf16_dot_loop(std::int64_t iters, float seed) {
  Vec acc[kAcc];
  for (int k = 0; k < kAcc; ++k) acc[k] = vset(seed + 1e-3f * static_cast<float>(k));
  const __m512bh x = _mm512_cvtne2ps_pbh(vset(1.0f / 1024), vset(1.0f / 1024));
  for (std::int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], x, x);
  }
  Vec s = acc[0];
  for (int k = 1; k < kAcc; ++k) s = s + acc[k];
  return vsum(s);
}
#endif

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

FmaPeak measure_fma_peak(int threads, double seconds, MatmulDtype dtype) {
  if (threads < 1) fail("fma peak", "thread count must be at least 1, got " + std::to_string(threads));
  if (!(seconds > 0)) fail("fma peak", "measuring time must be positive");
  // The loop the dtype's GEMM runs on: without AVX512_BF16, bf16 products run on fp32 FMAs.
  auto loop = &fma_loop;
  double flops_per_iter = kFlopsPerIter;
  std::string isa = kIsa;
#if defined(__AVX512BF16__)
  if (dtype == MatmulDtype::Bf16 && cpu::amx_bf16_usable()) {
    // The tile unit, which the bf16 GEMM of llmcc's layers runs on here (gemm_amx.h).
    loop = &cpu::amx_bf16_dot_loop;
    flops_per_iter = cpu::kAmxFlopsPerIter;
    isa = "amx_bf16 tdpbf16ps";
  } else if (dtype == MatmulDtype::Bf16) {
    loop = &bf16_dot_loop;
    flops_per_iter = kBf16FlopsPerIter;
    isa = "avx512_bf16 vdpbf16ps";
  }
#else
  if (dtype == MatmulDtype::Bf16) isa += " (no AVX512_BF16: bf16 runs on fp32 FMAs)";
#endif
  volatile float sink = 0;
  // Calibrate on one thread (also wakes the core up): bursts of about kBurst seconds, shorter
  // than a scheduler time slice, so on a loaded machine many bursts still run undisturbed.
  constexpr double kBurst = 5e-4;
  std::int64_t iters = 1 << 10;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + loop(iters, 1.0f);
    const double dt = seconds_since(t0);
    if (dt > 0.01 || iters > (std::int64_t{1} << 40)) {
      iters = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(iters) * kBurst / dt));
      break;
    }
    iters *= 4;
  }
  // Every thread runs bursts back to back for `seconds` and keeps its best burst's rate.
  std::vector<double> best(static_cast<std::size_t>(threads), 0.0);
  std::vector<float> out(static_cast<std::size_t>(threads), 0.0f);
#pragma omp parallel num_threads(threads)
  {
    const std::size_t id = static_cast<std::size_t>(omp_get_thread_num());
    float acc = 0;
    double mine = 0;
#pragma omp barrier
    const auto start = std::chrono::steady_clock::now();
    while (seconds_since(start) < seconds) {
      const auto t0 = std::chrono::steady_clock::now();
      acc += loop(iters, 1.0f + static_cast<float>(id));
      mine = std::max(mine, flops_per_iter * static_cast<double>(iters) / seconds_since(t0));
    }
    best[id] = mine;
    out[id] = acc;
  }
  for (float o : out) sink = sink + o;
  (void)sink;
  double sum = 0;
  for (double r : best) sum += r;
  FmaPeak p;
  p.gflops = sum * 1e-9;
  p.threads = threads;
  p.gflops_per_thread = p.gflops / threads;
  p.isa = isa;
  return p;
}

}  // namespace llmcc

namespace llmcc {
#if defined(__AVX512BF16__)
namespace {

// bf16 runs only when its dot-product peak is at least this many times the fp32 FMA peak: the
// bf16 GEMMs convert their operands to bf16 while packing and so reach less of their peak.
constexpr double kBf16Pays = 1.25;

std::string fixed(double x, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

}  // namespace
#endif

MatmulDtypeChoice choose_matmul_dtype(const std::string& name) {
  if (name != "auto" && name != "fp32" && name != "bf16")
    fail("dtype", "unknown dtype '" + name + "' (expected fp32, bf16 or auto)");
  if (name == "fp32") return {MatmulDtype::Fp32, ""};
#if defined(__AVX512BF16__)
  // Measured once per process, on the threads the run will use.
  static const std::pair<FmaPeak, FmaPeak> peaks = [] {
    const int threads = num_threads();
    return std::pair{measure_fma_peak(threads, 0.1, MatmulDtype::Fp32),
                     measure_fma_peak(threads, 0.1, MatmulDtype::Bf16)};
  }();
  const double ratio = peaks.second.gflops / peaks.first.gflops;
  const bool pays = ratio >= kBf16Pays;
  const std::string measured = "bf16 dot products (" + peaks.second.isa + ") measure " + fixed(peaks.second.gflops, 0) +
                               " GFLOP/s here against " + fixed(peaks.first.gflops, 0) + " for fp32 FMAs (" +
                               fixed(ratio, 2) + "x)";
  if (name == "auto")
    return {pays ? MatmulDtype::Bf16 : MatmulDtype::Fp32,
            std::string("--dtype auto chose ") + (pays ? "bf16: " : "fp32: ") + measured};
  if (pays) return {MatmulDtype::Bf16, ""};
  if (ratio < 1.0)
    return {MatmulDtype::Bf16, "bf16 matrix products are expected to run about " + fixed(1.0 / ratio, 1) +
                                   "x slower than fp32 on this CPU: " + measured + "; --dtype fp32 or auto is faster"};
  return {MatmulDtype::Bf16, "bf16 matrix products are expected to run no faster than fp32 on this CPU: " + measured};
#else
  if (name == "auto")
    return {MatmulDtype::Fp32,
            "--dtype auto chose fp32: this CPU (or build) has no AVX512_BF16, so bf16 products would run on the "
            "fp32 kernel with operands rounded to bf16, no faster"};
  return {MatmulDtype::Bf16,
          "bf16 matrix products run on the fp32 kernel with operands rounded to bf16 on this CPU (no AVX512_BF16): "
          "expect them a little slower than fp32, not faster; --dtype fp32 or auto is faster"};
#endif
}

}  // namespace llmcc
