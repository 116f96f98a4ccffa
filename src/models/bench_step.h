// One training step as `llmcc bench`, bench/bench_gpt2.cpp and the steady-state allocation test
// run it, for any model whose adgen entry takes (x, y) token batches: one fixed batch of random
// tokens, and per step
//   arena reset -> the entry's forward (filling the kept Saved record) and generated backward ->
//   AdamW step, which also zeroes the gradient store for the next step (AdamW::step_zero_grads).
// After the first step (which sizes the Saved record's vectors and the scratch arenas) a step
// allocates nothing from the heap. Model::bench_step (model.h) makes one over a model's weights.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/arena.h"
#include "llmcc/parameters.h"
#include "llmcc/train/adamw.h"
#include "llmcc/train/trainer.h"

namespace llmcc::models {

// What `llmcc bench` needs of a step, whatever the family.
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

namespace bench_detail {
// GPT-2's usual optimizer settings; the learning rate is constant (the schedule costs nothing).
inline constexpr AdamWConfig kAdamW{0.9f, 0.95f, 1e-8f, 0.1f};
inline constexpr float kLearningRate = 3e-4f;
// Throws llmcc::Error("[llmcc bench] ...") unless 1 <= B and 1 <= T <= max_seq_len.
void check_batch(int B, int T, int max_seq_len);
// B*T + 1 random ids below `vocab` from `seed`: inputs are the first B*T, targets the last B*T.
std::vector<std::int32_t> random_stream(int B, int T, int vocab, std::uint64_t seed);
}  // namespace bench_detail

// Entry: adgen's trait for a loss(model, Tokens x, Tokens y) entry (gpt2_loss_Entry, ...), or
// for one whose inputs hold more than the batch (a LoRA entry's base model in front): `make`
// builds the entry's Inputs from the batch, once. The model, its parameters and whatever `make`
// refers to are the caller's and must outlive the step.
template <class Entry>
class TrainBenchStep final : public BenchStep {
 public:
  using Model = typename Entry::Model;
  using Inputs = typename Entry::Inputs;
  using MakeInputs = std::function<Inputs(Tokens x, Tokens y)>;
  TrainBenchStep(
      const Model& model, ParameterStore& params, int B, int T, int vocab, int max_seq_len, std::uint64_t seed,
      const MakeInputs& make = [](Tokens x, Tokens y) { return Inputs{x, y}; })
      : model_(model),
        params_(params),
        B_(B),
        T_(T),
        grads_(adgen::make_grad(model)),
        opt_(params, bench_detail::kAdamW) {
    bench_detail::check_batch(B, T, max_seq_len);
    const std::vector<std::int32_t> stream = bench_detail::random_stream(B, T, vocab, seed);
    inputs_.assign(stream.begin(), stream.end() - 1);
    targets_.assign(stream.begin() + 1, stream.end());
    in_ = make(Tokens(inputs_.data(), B_, T_), Tokens(targets_.data(), B_, T_));
    // The step arena: one forward and backward measured, a sixteenth more reserved; the planning
    // step's gradient is zeroed again.
    const std::size_t high_water = measure_step_arena([&] { fwd_bwd(); }, "llmcc bench");
    grads_.zero();
    arena_ = std::make_unique<Arena>(arena_capacity_for(high_water));
  }
  TrainBenchStep(const TrainBenchStep&) = delete;
  TrainBenchStep& operator=(const TrainBenchStep&) = delete;

  float step() override {
    arena_->reset();
    ArenaScope scope(*arena_);
    // The gradient is zero here: from its constructor on the first step, then from the
    // optimizer step, which zeroes it in its pass.
    const float loss = fwd_bwd();
    opt_.step_zero_grads(params_, grads_.store, bench_detail::kLearningRate);
    return loss;
  }

  Split step_split() override {
    const Inputs& in = in_;
    Split s;
    arena_->reset();
    ArenaScope scope(*arena_);
    auto t0 = std::chrono::steady_clock::now();
    s.loss = Entry::fwd(model_, in, saved_);
    s.forward = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    Entry::bwd(model_, in, saved_, 1.0f, &grads_.grad);
    s.backward = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    opt_.step_zero_grads(params_, grads_.store, bench_detail::kLearningRate);
    s.optimizer = seconds_since(t0);
    return s;
  }

  std::size_t arena_high_water() const override { return arena_->high_water(); }
  std::size_t scratch_high_water() const override { return adgen::scratch_high_water(); }
  std::size_t arena_capacity() const override { return arena_->capacity(); }

 private:
  float fwd_bwd() {
    const float loss = Entry::fwd(model_, in_, saved_);
    Entry::bwd(model_, in_, saved_, 1.0f, &grads_.grad);
    return loss;
  }
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  const Model& model_;
  ParameterStore& params_;
  int B_, T_;
  adgen::GradBuffer<typename Entry::Grad> grads_;
  AdamW opt_;
  std::unique_ptr<Arena> arena_;                // measured by a planning step in the constructor
  typename Entry::Saved saved_;                 // kept across steps: a warm step allocates no records
  std::vector<std::int32_t> inputs_, targets_;  // (B, T) each
  Inputs in_;                                   // the entry's inputs over them, made once
};

}  // namespace llmcc::models
