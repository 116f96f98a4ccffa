// One training step as `llmcc bench`, bench/bench_gpt2.cpp and the steady-state allocation test
// run it, for GPT-2 (Gpt2BenchStep) and Llama (LlamaBenchStep): randomly initialised weights, one
// fixed batch of random tokens, and per step
//   arena reset -> <family>_loss_grad (forward + backward, reusing the kept Saved record) -> AdamW
//   step, which also zeroes the gradient store for the next step (AdamW::step_zero_grads).
// After the first step (which sizes the Saved record's vectors and the scratch arenas) a step
// allocates nothing from the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/train/adamw.h"
#include "model_traits.h"
#include "nn/gpt2_config.h"
#include "nn/llama_config.h"

namespace llmcc::cli {

// What cmd_bench needs of a step, whatever the family.
class BenchStep {
 public:
  virtual ~BenchStep() = default;

  // One training step; returns the loss.
  virtual float step() = 0;

  // The same step with the forward, the backward and the optimizer (gradient zeroing included)
  // timed separately, in seconds.
  struct Split {
    float loss = 0;
    double forward = 0, backward = 0, optimizer = 0;
  };
  virtual Split step_split() = 0;

  // Bytes the step's arena and adgen's scratch arenas have used at most.
  virtual std::size_t arena_high_water() const = 0;
  virtual std::size_t scratch_high_water() const = 0;
  virtual std::size_t arena_capacity() const = 0;
};

// Family: Gpt2Family or LlamaFamily (model_traits.h).
template <class Family>
class TrainBenchStep final : public BenchStep {
 public:
  using Config = typename Family::Config;
  // Throws llmcc::Error for B or T out of range (T must be at most config.max_seq_len).
  TrainBenchStep(const Config& config, int B, int T, std::uint64_t seed = 1337);
  TrainBenchStep(const TrainBenchStep&) = delete;
  TrainBenchStep& operator=(const TrainBenchStep&) = delete;

  float step() override;
  Split step_split() override;
  std::size_t arena_high_water() const override { return arena_->high_water(); }
  std::size_t scratch_high_water() const override;
  std::size_t arena_capacity() const override { return arena_->capacity(); }

  const Config& config() const { return config_; }
  int batch() const { return B_; }
  int seq_len() const { return T_; }

 private:
  Config config_;
  int B_, T_;
  typename Family::Weights weights_;
  adgen::GradBuffer<typename Family::Grad> grads_;
  AdamW opt_;
  std::unique_ptr<Arena> arena_;  // measured by a planning step in the constructor
  typename Family::Saved saved_;
  std::vector<std::int32_t> inputs_, targets_;  // (B, T) each
};

using Gpt2BenchStep = TrainBenchStep<Gpt2Family>;
using LlamaBenchStep = TrainBenchStep<LlamaFamily>;
extern template class TrainBenchStep<Gpt2Family>;
extern template class TrainBenchStep<LlamaFamily>;

}  // namespace llmcc::cli
