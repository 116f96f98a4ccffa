// One-row products against fp32, bf16 and int8 weights (cpu::gemv_rows, gemv_rows_bf16,
// gemv_rows_int8): the products of one KV-cache decoding step, on SmolLM2-360M's shapes (hidden
// 960, MLP 2560, vocabulary 49152), at 1 and 2 threads.
//
// "cold" cycles through copies of the matrix totalling at least 768 MiB, more than any last-level
// cache here, so each call reads its weights from memory as decoding a whole model does; "hot"
// repeats one matrix, which stays in cache: the kernel's arithmetic rate. Counter GB/s: bytes of
// weights (and int8 scales) read per second; compare it with the machine's read bandwidth.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/int8_rows.h"
#include "llmcc/runtime.h"

namespace {

enum class Dtype { F32, Bf16, Int8 };

constexpr std::size_t kColdBytes = std::size_t{768} << 20;

struct Copies {
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<std::uint16_t>> bf16;
  std::vector<std::vector<std::int8_t>> q;
  std::vector<std::vector<float>> scales;
  std::size_t bytes = 0;  // of one copy
  std::size_t count = 0;
};

Copies make_copies(Dtype dtype, int N, int K, bool cold) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(N) * K);  // (N, K)
  for (float& e : w) e = normal(rng);
  Copies c;
  const std::size_t n = w.size(), nb = static_cast<std::size_t>(N * llmcc::cpu::int8_blocks(K));
  c.bytes = dtype == Dtype::F32 ? n * 4 : dtype == Dtype::Bf16 ? n * 2 : n + nb * 4;
  c.count = cold ? (kColdBytes + c.bytes - 1) / c.bytes : 1;
  for (std::size_t i = 0; i < c.count; ++i) {
    if (dtype == Dtype::F32) {
      c.f32.push_back(w);
    } else if (dtype == Dtype::Bf16) {
      c.bf16.emplace_back(n);
      llmcc::cpu::floats_to_bf16(w.data(), c.bf16.back().data(), static_cast<std::int64_t>(n));
    } else {
      c.q.emplace_back(n);
      c.scales.emplace_back(nb);
      llmcc::cpu::quantize_rows_int8(w.data(), N, K, c.q.back().data(), c.scales.back().data());
    }
  }
  return c;
}

void run(benchmark::State& state, Dtype dtype, bool cold) {
  const int N = static_cast<int>(state.range(0)), K = static_cast<int>(state.range(1));
  llmcc::set_num_threads(static_cast<int>(state.range(2)));
  const Copies c = make_copies(dtype, N, K, cold);
  std::vector<float> x(static_cast<std::size_t>(K), 0.5f), y(static_cast<std::size_t>(N));  // (1, K), (1, N)
  std::size_t i = 0;
  for (auto _ : state) {
    if (dtype == Dtype::F32)
      llmcc::cpu::gemv_rows(N, K, 1.0f, x.data(), c.f32[i].data(), K, 0.0f, y.data(), nullptr);
    else if (dtype == Dtype::Bf16)
      llmcc::cpu::gemv_rows_bf16(N, K, x.data(), c.bf16[i].data(), K, y.data(), nullptr);
    else
      llmcc::cpu::gemv_rows_int8(N, K, x.data(), c.q[i].data(), c.scales[i].data(), y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    i = i + 1 == c.count ? 0 : i + 1;
  }
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(c.bytes) * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "K", "threads"});
  for (const auto& [N, K] : {std::pair{2560, 960}, std::pair{960, 2560}, std::pair{49152, 960}})
    for (int threads : {1, 2}) b->Args({N, K, threads});
  b->UseRealTime();
}

}  // namespace

BENCHMARK_CAPTURE(run, f32_cold, Dtype::F32, true)->Apply(shapes);
BENCHMARK_CAPTURE(run, bf16_cold, Dtype::Bf16, true)->Apply(shapes);
BENCHMARK_CAPTURE(run, int8_cold, Dtype::Int8, true)->Apply(shapes);
BENCHMARK_CAPTURE(run, int8_hot, Dtype::Int8, false)->Apply(shapes);
BENCHMARK_CAPTURE(run, bf16_hot, Dtype::Bf16, false)->Apply(shapes);

BENCHMARK_MAIN();
