// Sampler and generate(): sampling and the generation loop shared by the models' generators.
#include "models/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "llmcc/error.h"

namespace llmcc::models {

namespace {
constexpr const char* kSampler = "sampler";
}  // namespace

// ---- sampling ---------------------------------------------------------------------------------

void SamplingConfig::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f)
    fail(kSampler, "temperature is " + std::to_string(temperature) + ", expected a finite value >= 0 (0 = greedy)");
  if (top_k < 0) fail(kSampler, "top_k is " + std::to_string(top_k) + ", expected >= 0 (0 = off)");
}

Sampler::Sampler(int vocab_size) : vocab_size_(vocab_size) {
  if (vocab_size <= 0) fail(kSampler, "vocab_size is " + std::to_string(vocab_size) + ", expected > 0");
  values_.resize(static_cast<std::size_t>(vocab_size));
  probs_.resize(static_cast<std::size_t>(vocab_size));
}

std::int32_t Sampler::sample(const Tensor& logits, const SamplingConfig& cfg, Rng& rng) {
  if (!logits.defined()) fail(kSampler, "logits tensor has no data");
  return sample(std::span<const float>(logits.f32(), static_cast<std::size_t>(logits.numel())), cfg, rng);
}

std::int32_t Sampler::sample(std::span<const float> logits, const SamplingConfig& cfg, Rng& rng) {
  cfg.validate();
  const int V = vocab_size_;
  if (logits.size() < static_cast<std::size_t>(V))
    fail(kSampler, "logits have " + std::to_string(logits.size()) + " values, expected at least the vocab size " +
                       std::to_string(V));
  // The first id of largest logit; greedy decoding, and the softmax's shift.
  int best = 0;
  for (int i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;
  if (cfg.temperature == 0.0f || cfg.top_k == 1) return best;

  // Kept ids: all, or the top_k largest (the k-th largest value is the threshold; ids equal to it
  // are kept in id order until k are kept, so exactly k survive and the choice is deterministic).
  float threshold = -INFINITY;
  int at_threshold = V;  // how many ids equal to the threshold may still be kept
  if (cfg.top_k > 0 && cfg.top_k < V) {
    std::copy(logits.begin(), logits.begin() + V, values_.begin());
    auto kth = values_.begin() + (cfg.top_k - 1);
    std::nth_element(values_.begin(), kth, values_.end(), std::greater<float>());
    threshold = *kth;
    const auto above = std::count_if(logits.begin(), logits.begin() + V, [&](float l) { return l > threshold; });
    at_threshold = cfg.top_k - static_cast<int>(above);
  }
  const double max = logits[best], inv_t = 1.0 / static_cast<double>(cfg.temperature);
  double sum = 0.0;
  for (int i = 0; i < V; ++i) {
    double p = 0.0;
    if (logits[i] > threshold || (logits[i] == threshold && at_threshold-- > 0))
      p = std::exp((static_cast<double>(logits[i]) - max) * inv_t);
    probs_[i] = p;
    sum += p;
  }
  // One uniform draw walks the cumulative distribution in id order.
  const double target = rng.uniform_f64() * sum;
  double acc = 0.0;
  int last_kept = best;
  for (int i = 0; i < V; ++i) {
    if (probs_[i] == 0.0) continue;
    acc += probs_[i];
    last_kept = i;
    if (target < acc) return i;
  }
  return last_kept;  // rounding left target at the very end
}

// ---- whole generations ------------------------------------------------------------------------

GenerateStats generate(Generator& gen, std::span<const std::int32_t> prompt, int max_new_tokens,
                       const SamplingConfig& cfg, Rng& rng, const std::function<void(std::int32_t)>& on_token) {
  cfg.validate();
  if (max_new_tokens < 0) fail("generate", "max_new_tokens is " + std::to_string(max_new_tokens) + ", expected >= 0");
  const std::int32_t start[1] = {cfg.eot};
  if (prompt.empty()) prompt = start;
  using Clock = std::chrono::steady_clock;
  GenerateStats st;
  st.prompt_tokens = static_cast<int>(prompt.size());
  if (max_new_tokens == 0) return st;
  Sampler sampler(gen.vocab_size());
  const auto t0 = Clock::now();
  Tensor logits = gen.prefill(prompt);  // the next token's logits
  const auto t1 = Clock::now();
  for (;;) {
    const std::int32_t next = sampler.sample(logits, cfg, rng);
    ++st.new_tokens;
    if (on_token) on_token(next);
    if (cfg.stop_at_eot && (next == cfg.eot || next == cfg.document_start)) {
      st.stopped_at_eot = true;
      break;
    }
    if (st.new_tokens == max_new_tokens) break;
    if (gen.full() && gen.on_full() == ContextFull::Stop) {
      st.stopped_at_limit = true;
      break;
    }
    logits = gen.step(next);
    ++st.decode_steps;
  }
  const auto t2 = Clock::now();
  st.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  st.decode_seconds = std::chrono::duration<double>(t2 - t1).count();
  return st;
}

WindowGenerator::WindowGenerator(const char* who, const char* start_token, int max_length, int vocab_size,
                                 ContextFull on_full)
    : who_(who), start_token_(start_token), max_length_(max_length), vocab_size_(vocab_size), on_full_(on_full) {
  tokens_.reserve(static_cast<std::size_t>(max_length));
}

void WindowGenerator::check_token(std::int32_t token, const char* what) const {
  if (token < 0 || token >= vocab_size_)
    fail(who_, std::string(what) + " token id " + std::to_string(token) + " is outside the model's vocabulary [0, " +
                   std::to_string(vocab_size_) + ")");
}

Tensor WindowGenerator::prefill(std::span<const std::int32_t> prompt) {
  if (prompt.empty())
    fail(who_, std::string("the prompt is empty, expected at least one token (e.g. ") + start_token_ + ")");
  if (prompt.size() > static_cast<std::size_t>(max_length_))
    fail(who_, "the prompt has " + std::to_string(prompt.size()) + " tokens, more than the model's context of " +
                   std::to_string(max_length_) + " (max_seq_len)");
  for (std::int32_t t : prompt) check_token(t, "prompt");
  tokens_.assign(prompt.begin(), prompt.end());  // within the reserved capacity: no allocation
  return run_prompt(tokens_, true);
}

Tensor WindowGenerator::step(std::int32_t token) {
  check_token(token, "next");
  if (full()) {
    if (on_full_ == ContextFull::Stop)
      fail(who_, "the sequence already holds " + std::to_string(max_length_) +
                     " tokens, the model's context (max_seq_len); cannot append another (use "
                     "ContextFull::Slide to slide the window)");
    // Slide: keep the last maxT-1 tokens, recompute their cache at positions 0.., then append.
    std::copy(tokens_.begin() + 1, tokens_.end(), tokens_.begin());
    tokens_.pop_back();
    if (!tokens_.empty()) run_prompt(tokens_, false);
    ++slides_;
  }
  return decode_one(token);
}

}  // namespace llmcc::models
