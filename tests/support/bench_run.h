// A bench step (models/bench_step.h) with the model it trains: random weights from `seed`, as
// `llmcc bench` makes them.
#pragma once

#include <cstdint>
#include <memory>

#include "models/registry.h"

namespace llmcc::test {

struct BenchRun {
  std::unique_ptr<models::Model> model;
  std::unique_ptr<models::BenchStep> step;
  models::BenchStep& operator*() { return *step; }
  models::BenchStep* operator->() { return step.get(); }
};

inline BenchRun bench_run(const models::ModelConfig& config, int B, int T, std::uint64_t seed = 1337) {
  BenchRun r;
  r.model = models::make_model(config);
  r.model->init(seed);
  r.step = r.model->bench_step(B, T, seed);
  return r;
}

}  // namespace llmcc::test
