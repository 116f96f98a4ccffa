#include "models/bench_step.h"

#include <string>

#include "llmcc/adgen.h"
#include "llmcc/error.h"
#include "llmcc/train/rng.h"
#include "models/model.h"

namespace llmcc::models {

namespace {

// Throws unless 1 <= B and 1 <= T <= max_seq_len; returns `model`.
Model& checked(Model& model, int B, int T) {
  const int max_seq_len = model.config().max_seq_len();
  if (B < 1) fail("llmcc bench", "batch size must be at least 1, got " + std::to_string(B));
  if (T < 1 || T > max_seq_len)
    fail("llmcc bench", "sequence length must be in [1, " + std::to_string(max_seq_len) +
                            "] (the model's max_seq_len), got " + std::to_string(T));
  return model;
}

TrainerOptions bench_options() {
  TrainerOptions o;
  o.steps = std::int64_t{1} << 40;  // the schedule's length: never reached
  o.schedule.max_lr = o.schedule.min_lr = BenchStep::kLearningRate;
  o.adamw = BenchStep::kAdamW;
  o.val_every = 0;
  o.quiet = true;
  o.name = "llmcc bench";
  return o;
}

}  // namespace

BenchStep::FixedBatch::FixedBatch(int B, int T, int vocab, std::uint64_t seed)
    : tokens_(2 * static_cast<std::size_t>(B) * static_cast<std::size_t>(T)) {
  // One stream of B*T + 1 random tokens: the targets are the inputs shifted by one (as llm.c).
  Rng rng(seed + 1);
  const std::size_t n = tokens_.size() / 2;
  std::vector<std::int32_t> stream(n + 1);
  for (auto& id : stream) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  std::copy(stream.begin(), stream.end() - 1, tokens_.begin());
  std::copy(stream.begin() + 1, stream.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(n));
  batch_ = TokenPair(Tokens(tokens_.data(), B, T), Tokens(tokens_.data() + n, B, T));
}

BenchStep::BenchStep(Model& model, int B, int T, std::uint64_t seed)
    : batch_(B, T, checked(model, B, T).config().vocab_size(), seed),
      trainer_(model.make_trainer(batch_, nullptr, bench_options(), {})) {
  trainer_->arena();  // planned now, so the first timed step does not include it
}

BenchStep::~BenchStep() = default;

float BenchStep::step() { return trainer_->step_once(); }

BenchStep::Split BenchStep::step_split() {
  TrainLoop::StepTimes times;
  Split s;
  s.loss = trainer_->step_once(&times);
  s.forward = times.forward;
  s.backward = times.backward;
  s.optimizer = times.update;
  return s;
}

std::size_t BenchStep::arena_high_water() const { return trainer_->arena().high_water(); }
std::size_t BenchStep::scratch_high_water() const { return adgen::scratch_high_water(); }
std::size_t BenchStep::arena_capacity() const { return trainer_->arena().capacity(); }

}  // namespace llmcc::models
