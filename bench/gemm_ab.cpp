// In-process A/B of two builds of cpu::gemm_packed over the GEMMs of one GPT-2 124M training
// step (bench/gemm_ab.sh builds it). On a shared machine the load drifts by 10-20% within a
// minute, more than most GEMM changes are worth, so two separate benchmark runs cannot tell
// them apart. Here every shape is called four times in a row, alternating A and B (the order
// flipped each round), so drift hits both alike; the medians per shape and the sum over one
// step's calls are compared.
//
//   gemm_ab THREADS ROWS [ROUNDS] [EVICT]
// ROWS is B*T (256 for B=4, T=64). EVICT=1 (default) walks a 256 MB buffer before every call,
// so weights come from memory as in a training step; 0 keeps them cached.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ab_common.h"

// The same function from two builds: gemm_ab.sh compiles A with -Dllmcc=llmcc_ab_a and B with
// -Dllmcc=llmcc_ab_b.
#define LLMCC_AB_DECLARE(ns)                                                                              \
  namespace ns::cpu {                                                                                     \
  void gemm_packed(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, \
                   const float* B, int ldb, float beta, float* C, int ldc);                               \
  }
LLMCC_AB_DECLARE(llmcc_ab_a)
LLMCC_AB_DECLARE(llmcc_ab_b)

namespace {

using GemmFn = void (*)(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int);

struct Shape {
  std::string name;
  bool trans_a, trans_b;
  int m, n, k;
  int calls_per_step;
};

// One step's GEMMs, as bench/bench_gemm.cpp lists them: per linear layer C -> OC, the forward
// (x . w^T), d_x (d_out . w) and d_w (d_out^T . x); 12 of each per step, one LM head.
std::vector<Shape> step_shapes(int rows) {
  struct Layer {
    const char* name;
    int C, OC, per_step;
  };
  const Layer layers[] = {{"qkv", 768, 2304, 12},
                          {"attproj", 768, 768, 12},
                          {"fc", 768, 3072, 12},
                          {"fcproj", 3072, 768, 12},
                          {"lmhead", 768, 50304, 1}};
  std::vector<Shape> shapes;
  for (const Layer& l : layers) {
    shapes.push_back({std::string("fwd ") + l.name, false, true, rows, l.OC, l.C, l.per_step});
    shapes.push_back({std::string("dx  ") + l.name, false, false, rows, l.C, l.OC, l.per_step});
    shapes.push_back({std::string("dw  ") + l.name, true, false, l.OC, l.C, rows, l.per_step});
  }
  return shapes;
}

using llmcc_bench::median;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gemm_ab THREADS ROWS [ROUNDS=5] [EVICT=1]\n");
    return 2;
  }
  const int threads = std::atoi(argv[1]), rows = std::atoi(argv[2]);
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  const bool evict = argc > 4 ? std::atoi(argv[4]) != 0 : true;
  if (threads < 1 || rows < 1 || rounds < 1) {
    std::fprintf(stderr, "gemm_ab: THREADS, ROWS and ROUNDS must be positive\n");
    return 2;
  }
  omp_set_num_threads(threads);
  const GemmFn fns[2] = {&llmcc_ab_a::cpu::gemm_packed, &llmcc_ab_b::cpu::gemm_packed};

  const std::vector<Shape> shapes = step_shapes(rows);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::vector<float>> a(shapes.size()), b(shapes.size()), c(shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    a[i].resize(static_cast<std::size_t>(s.m) * s.k);
    b[i].resize(static_cast<std::size_t>(s.k) * s.n);
    c[i].assign(static_cast<std::size_t>(s.m) * s.n, 0.0f);
    for (float& x : a[i]) x = dist(rng);
    for (float& x : b[i]) x = dist(rng);
  }
  std::vector<float> big(evict ? std::size_t{64} << 20 : 16);

  std::vector<std::vector<double>> seconds[2];
  seconds[0].resize(shapes.size());
  seconds[1].resize(shapes.size());
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const Shape& s = shapes[i];
      for (int call = 0; call < 4; ++call) {
        const int side = (call + r) & 1;
        for (std::size_t j = 0; j < big.size(); j += 16) big[j] += 1.0f;
        const auto t0 = std::chrono::steady_clock::now();
        fns[side](s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a[i].data(), s.trans_a ? s.m : s.k, b[i].data(),
                  s.trans_b ? s.k : s.n, 1.0f, c[i].data(), s.n);
        seconds[side][i].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  }

  std::printf("gemm_ab: %d threads, %d rows, %d rounds, weights %s\n", threads, rows, rounds,
              evict ? "evicted before each call" : "cached");
  std::printf("%-12s %10s %10s %8s\n", "shape", "A GFLOP/s", "B GFLOP/s", "B/A");
  double step[2] = {0.0, 0.0};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    const double flop = 2.0 * s.m * s.n * s.k;
    const double t[2] = {median(seconds[0][i]), median(seconds[1][i])};
    std::printf("%-12s %10.1f %10.1f %7.3fx\n", s.name.c_str(), flop / t[0] * 1e-9, flop / t[1] * 1e-9, t[0] / t[1]);
    for (int side = 0; side < 2; ++side) step[side] += t[side] * s.calls_per_step;
  }
  std::printf("one step's GEMMs (medians): A %.1f ms, B %.1f ms, B is %.3fx A's speed\n", step[0] * 1e3, step[1] * 1e3,
              step[0] / step[1]);
  return 0;
}
