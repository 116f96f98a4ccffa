// cpu::gemm on the GEMM shapes of one GPT-2 124M training step (rows M = B*T = 256 and 1024):
// for each linear layer C -> OC with weight w (OC, C),
//   fwd:  out (M, OC)  = x (M, C) . w^T           gemm(N, T), K = C
//   dx:   d_x (M, C)  += d_out (M, OC) . w         gemm(N, N), K = OC
//   dw:   d_w (OC, C) += d_out^T (OC, M) . x       gemm(T, N), K = M
// at 1 and 2 threads. Counters: GFLOPS (2*M*N*K per call, wall time), threads_busy (threads of
// this process that used at least a quarter of the wall time, read from /proc: shows that the
// library really ran on the thread count asked for) and max_rel_err (sampled entries of C
// against a double-precision dot product; a wrong result fails the benchmark).
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace {

enum class Pass { Fwd, Dx, Dw };

struct Layer {
  const char* name;
  int C, OC;
};
// GPT-2 124M: qkv, attention proj, fc, fc proj, LM head (vocabulary padded to 50304).
constexpr Layer kLayers[] = {
    {"qkv", 768, 2304}, {"attproj", 768, 768}, {"fc", 768, 3072}, {"fcproj", 3072, 768}, {"lmhead", 768, 50304}};

// CPU ticks (utime + stime) of every thread of this process.
std::map<int, long> thread_ticks() {
  std::map<int, long> ticks;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return ticks;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string line;
    std::getline(f, line);
    // Fields after the ")" that closes the command name: state is field 3, utime 14, stime 15.
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> fields;
    std::string tok;
    for (char c : line.substr(close + 2)) {
      if (c == ' ') {
        fields.push_back(tok);
        tok.clear();
      } else {
        tok += c;
      }
    }
    if (fields.size() > 12) ticks[std::stoi(e->d_name)] = std::stol(fields[11]) + std::stol(fields[12]);
  }
  closedir(dir);
  return ticks;
}

void bm_gemm(benchmark::State& state, Layer layer, Pass pass, int M, int threads) {
  omp_set_num_threads(threads);
  const int C = layer.C, OC = layer.OC;
  // GEMM dimensions (rows, cols, inner) and storage of A and B for this pass.
  int m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  switch (pass) {
    case Pass::Fwd:
      m = M, n = OC, k = C, tb = true;
      break;
    case Pass::Dx:
      m = M, n = C, k = OC;
      break;
    case Pass::Dw:
      m = OC, n = C, k = M, ta = true;
      break;
  }
  const int lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
  std::vector<float> A(static_cast<std::size_t>(m) * k), B(static_cast<std::size_t>(k) * n),
      Cm(static_cast<std::size_t>(m) * n);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto* v : {&A, &B, &Cm})
    for (float& x : *v) x = dist(rng);

  // Correctness first: one call with beta = 1 on known C, then 512 sampled entries in double.
  const std::vector<float> C0 = Cm;
  llmcc::cpu::gemm(ta, tb, m, n, k, 1.0f, A.data(), lda, B.data(), ldb, 1.0f, Cm.data(), ldc);
  double max_rel = 0.0;
  std::uniform_int_distribution<int> ri(0, m - 1), rj(0, n - 1);
  for (int s = 0; s < 512; ++s) {
    const int i = ri(rng), j = rj(rng);
    double ref = C0[static_cast<std::size_t>(i) * ldc + j], mag = std::fabs(ref);
    for (int p = 0; p < k; ++p) {
      const double a = ta ? A[static_cast<std::size_t>(p) * lda + i] : A[static_cast<std::size_t>(i) * lda + p];
      const double b = tb ? B[static_cast<std::size_t>(j) * ldb + p] : B[static_cast<std::size_t>(p) * ldb + j];
      ref += a * b;
      mag += std::fabs(a * b);
    }
    // Relative to the sum of magnitudes: fp32 accumulation error grows with it, not with |ref|.
    max_rel = std::max(max_rel, std::fabs(Cm[static_cast<std::size_t>(i) * ldc + j] - ref) / mag);
  }
  if (!(max_rel < 1e-5)) {
    state.SkipWithError(("wrong result: max relative error " + std::to_string(max_rel)).c_str());
    return;
  }

  const auto ticks0 = thread_ticks();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    llmcc::cpu::gemm(ta, tb, m, n, k, 1.0f, A.data(), lda, B.data(), ldb, 1.0f, Cm.data(), ldc);
    benchmark::DoNotOptimize(Cm.data());
    benchmark::ClobberMemory();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto ticks1 = thread_ticks();
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  int busy = 0;
  for (const auto& [tid, t] : ticks1) {
    const auto it = ticks0.find(tid);
    const long before = it == ticks0.end() ? 0 : it->second;
    if ((t - before) / hz >= 0.25 * wall) ++busy;
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads_busy"] = busy;
  state.counters["max_rel_err"] = max_rel;
  state.SetLabel(LLMCC_BENCH_GEMM_LIB);
}

const int kRegistered = [] {
  for (int threads : {1, 2}) {
    for (int M : {256, 1024}) {
      for (const Layer& layer : kLayers) {
        for (Pass pass : {Pass::Fwd, Pass::Dx, Pass::Dw}) {
          const char* pname = pass == Pass::Fwd ? "fwd" : pass == Pass::Dx ? "dx" : "dw";
          const std::string name = std::string(pname) + "/" + layer.name + "_" + std::to_string(layer.C) + "x" +
                                   std::to_string(layer.OC) + "/M:" + std::to_string(M) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), bm_gemm, layer, pass, M, threads)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
