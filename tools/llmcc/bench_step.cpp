#include "bench_step.h"

#include <chrono>
#include <string>

#include "llmcc/error.h"
#include "llmcc/train/rng.h"
#include "llmcc/train/trainer.h"
#include "model_family.h"

namespace llmcc::cli {
namespace {

// GPT-2's usual optimizer settings; the learning rate is constant (the schedule costs nothing).
constexpr AdamWConfig kAdamW{0.9f, 0.95f, 1e-8f, 0.1f};
constexpr float kLearningRate = 3e-4f;

template <class Config>
const Config& checked(const Config& config, int B, int T) {
  config.validate();
  if (B < 1) fail("llmcc bench", "batch size must be at least 1, got " + std::to_string(B));
  if (T < 1 || T > config.max_seq_len) {
    fail("llmcc bench", "sequence length must be in [1, " + std::to_string(config.max_seq_len) +
                            "] (the model's max_seq_len), got " + std::to_string(T));
  }
  return config;
}

// The family's weights, initialised from `seed` (gpt2_init, llama_init).
template <class Family>
typename Family::Weights initialised(const typename Family::Config& config, std::uint64_t seed) {
  typename Family::Weights w = Family::make(config);
  Family::init(w, seed);
  return w;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// ---- the step -------------------------------------------------------------------------------

template <class Family>
TrainBenchStep<Family>::TrainBenchStep(const Config& config, int B, int T, std::uint64_t seed)
    : config_(checked(config, B, T)),
      B_(B),
      T_(T),
      weights_(initialised<Family>(config, seed)),
      grads_(adgen::make_grad(weights_.model)),
      opt_(weights_.params, kAdamW) {
  // One stream of B*T + 1 random tokens: targets are the inputs shifted by one (as llm.c).
  Rng rng(seed + 1);
  std::vector<std::int32_t> stream(static_cast<std::size_t>(B) * T + 1);
  for (auto& id : stream) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(config.vocab_size)));
  inputs_.assign(stream.begin(), stream.end() - 1);
  targets_.assign(stream.begin() + 1, stream.end());
  // The step arena: one forward and backward measured, a sixteenth more reserved; the planning
  // step's gradient is zeroed again.
  const Tokens x(inputs_.data(), B_, T_), y(targets_.data(), B_, T_);
  const std::size_t high_water = train::measure_step_arena(
      [&] {
        Family::fwd(weights_, x, y, saved_);
        Family::bwd(weights_, x, y, saved_, 1.0f, &grads_.grad);
      },
      "llmcc bench");
  grads_.zero();
  arena_ = std::make_unique<Arena>(train::arena_capacity_for(high_water));
}

template <class Family>
float TrainBenchStep<Family>::step() {
  const Tokens x(inputs_.data(), B_, T_), y(targets_.data(), B_, T_);
  arena_->reset();
  ArenaScope scope(*arena_);
  // The gradient is zero here: from its constructor on the first step, then from the
  // optimizer step, which zeroes it in its pass.
  const float loss = Family::fwd(weights_, x, y, saved_);
  Family::bwd(weights_, x, y, saved_, 1.0f, &grads_.grad);
  opt_.step_zero_grads(weights_.params, grads_.store, kLearningRate);
  return loss;
}

template <class Family>
BenchStep::Split TrainBenchStep<Family>::step_split() {
  const Tokens x(inputs_.data(), B_, T_), y(targets_.data(), B_, T_);
  Split s;
  arena_->reset();
  ArenaScope scope(*arena_);
  // What <family>_loss_grad(..., saved) runs, in its two halves.
  auto t0 = std::chrono::steady_clock::now();
  s.loss = Family::fwd(weights_, x, y, saved_);
  s.forward = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  Family::bwd(weights_, x, y, saved_, 1.0f, &grads_.grad);
  s.backward = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  opt_.step_zero_grads(weights_.params, grads_.store, kLearningRate);
  s.optimizer = seconds_since(t0);
  return s;
}

template <class Family>
std::size_t TrainBenchStep<Family>::scratch_high_water() const {
  return adgen::scratch_high_water();
}

template class TrainBenchStep<Gpt2Family>;
template class TrainBenchStep<LlamaFamily>;

}  // namespace llmcc::cli
