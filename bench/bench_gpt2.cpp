// One training step (Model::bench_step, models/bench_step.h: a Trainer's step, forward, generated
// backward, clipping and AdamW, on one fixed batch) for the
// presets gpt2-tiny and gpt2 (124M) at B=4, T=64, on 1 and 2 threads. Counters: tokens/s and
// GFLOP/s (ModelConfig::flops_per_step over wall time). `llmcc bench` prints the same step with MFU and
// the per-op profile; this is the Google Benchmark view for regression tracking.
//
// Also the cost of a disabled LLMCC_PROFILE scope (one relaxed atomic load and a branch) next
// to the same function without one: the profiler must cost nothing measurable when off.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "llmcc/profile.h"
#include "llmcc/runtime.h"
#include "models/registry.h"

namespace {

void bm_train_step(benchmark::State& state, std::string preset, int B, int T, int threads) {
  llmcc::set_num_threads(threads);
  const llmcc::models::ModelConfig config = llmcc::models::model_preset(preset);
  const std::unique_ptr<llmcc::models::Model> model = llmcc::models::make_model(config);
  model->init(1337);
  const std::unique_ptr<llmcc::models::BenchStep> bench = model->bench_step(B, T, 1337);
  for (int i = 0; i < 2; ++i) bench->step();  // warm-up: sizes memory, starts the thread team
  for (auto _ : state) benchmark::DoNotOptimize(bench->step());
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(B) * T, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOPS"] =
      benchmark::Counter(config.flops_per_step(B, T) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The same trivial body with and without a (disabled) profiler scope.
__attribute__((noinline)) int plain(int x) {
  benchmark::DoNotOptimize(x);
  return x + 1;
}
__attribute__((noinline)) int scoped(int x) {
  LLMCC_PROFILE("bench.scope");
  benchmark::DoNotOptimize(x);
  return x + 1;
}

void bm_call_plain(benchmark::State& state) {
  int x = 0;
  for (auto _ : state) x = plain(x);
  benchmark::DoNotOptimize(x);
}
void bm_call_profile_off(benchmark::State& state) {
  llmcc::profile::enable(false);
  int x = 0;
  for (auto _ : state) x = scoped(x);
  benchmark::DoNotOptimize(x);
}
void bm_call_profile_on(benchmark::State& state) {
  llmcc::profile::enable(true);
  int x = 0;
  for (auto _ : state) x = scoped(x);
  llmcc::profile::enable(false);
  benchmark::DoNotOptimize(x);
}

const int kRegistered = [] {
  for (const char* preset : {"gpt2-tiny", "gpt2"}) {
    for (int threads : {1, 2}) {
      const std::string name = std::string("train_step/") + preset + "/B:4/T:64/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), bm_train_step, preset, 4, 64, threads)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(std::string(preset) == "gpt2" ? 5.0 : 1.0);
    }
  }
  benchmark::RegisterBenchmark("profile_scope/none", bm_call_plain);
  benchmark::RegisterBenchmark("profile_scope/off", bm_call_profile_off);
  benchmark::RegisterBenchmark("profile_scope/on", bm_call_profile_on);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
