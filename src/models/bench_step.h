// The training step `llmcc bench`, bench/bench_gpt2.cpp and the steady-state allocation test
// time: a Trainer's step (Model::make_trainer, TrainLoop::step_once) over one fixed batch of
// random tokens, so what is measured is what `llmcc train` runs per step: the forward, the
// generated backward, clipping at norm 1, the divergence guard and AdamW (which zeroes the
// gradient in its pass), with a LoRA model's dropout masks drawn per step. Nothing around a step
// runs: no validation, log or checkpoint. After the first step (which sizes the Saved record's
// vectors and the scratch arenas) a step allocates nothing from the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "llmcc/train/batch_source.h"
#include "llmcc/train/trainer.h"

namespace llmcc::models {

class Model;

class BenchStep {
 public:
  // GPT-2's usual optimizer settings; the learning rate is constant (the schedule costs nothing).
  static constexpr AdamWConfig kAdamW{0.9f, 0.95f, 1e-8f, 0.1f};
  static constexpr float kLearningRate = 3e-4f;

  // A step over `model`'s weights (which it trains) on B x T tokens drawn from `seed`. Throws
  // llmcc::Error("[llmcc bench] ...") unless 1 <= B and 1 <= T <= the model's max_seq_len.
  BenchStep(Model& model, int B, int T, std::uint64_t seed);
  BenchStep(const BenchStep&) = delete;
  BenchStep& operator=(const BenchStep&) = delete;
  ~BenchStep();

  // One training step; returns the loss.
  float step();

  // The same step with the forward, the backward and the update (clipping and AdamW, gradient
  // zeroing included) timed separately, in seconds.
  struct Split {
    float loss = 0;
    double forward = 0, backward = 0, optimizer = 0;
  };
  Split step_split();

  // Bytes the step's arena and adgen's scratch arenas have used at most, and the arena reserved.
  std::size_t arena_high_water() const;
  std::size_t scratch_high_water() const;
  std::size_t arena_capacity() const;

 private:
  // The one batch every step trains on.
  class FixedBatch final : public BatchSource<TokenPair> {
   public:
    FixedBatch(int B, int T, int vocab, std::uint64_t seed);
    const TokenPair& next() override { return batch_; }
    DataLoaderState state() const override { return {}; }
    void set_state(const DataLoaderState&) override {}
    void reset() override {}
    double items_per_batch() const override { return static_cast<double>(tokens_.size() / 2); }

   private:
    std::vector<std::int32_t> tokens_;  // inputs (B, T), then targets (B, T)
    TokenPair batch_;
  };
  FixedBatch batch_;
  std::unique_ptr<TrainLoop> trainer_;
};

}  // namespace llmcc::models
