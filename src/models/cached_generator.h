// A family's KV-cache decoder, written once: the prompt runs once through the model's decode
// method (a prefill: the forward's ops over all its tokens, each layer keeping its keys and
// values), then each new token costs one position (one row per layer, attention over the cache).
//
//   CachedGenerator<Gpt2> gen(model, ContextFull::Slide);   // plans every byte once
//   GenerateStats st = generate(gen, prompt, 200, cfg, rng, on_token);   // generate.h
//
// A family provides, beside its model struct M:
//   Tensor M::decode(const Tokens& idx, KvCache& cache) const      // (1, T) -> (1, 1, V') logits
//   KvCacheShape kv_cache_shape(const M& model)                     // its cache and scratch sizes
//   GeneratorLabels generator_labels(const M& model)                // its name in errors
// Logits equal M::forward over the whole sequence (tests/support/generate_suite.h checks each).
//
// Context limit: a sequence holds at most max_seq_len tokens. With ContextFull::Stop,
// generate() ends there and step() on a full generator throws; with ContextFull::Slide the window
// moves by one token: the cache is recomputed (a prefill) for the last max_seq_len - 1 tokens at
// positions 0.., then the new token is appended, which is exactly the forward over the last
// max_seq_len tokens (as nanoGPT crops its context). Sliding costs a prefill per token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "llmcc/arena.h"
#include "llmcc/tensor.h"
#include "models/generate.h"
#include "models/kv_cache.h"

namespace llmcc::models {

// What a generator's errors call it ("gpt2 generate") and the token an empty prompt lacks.
struct GeneratorLabels {
  const char* who;
  const char* start_token;
};

template <class M>
class CachedGenerator final : public WindowGenerator {
 public:
  // The model must outlive the generator. Throws llmcc::Error for an invalid config or a model
  // without weights.
  explicit CachedGenerator(const M& model, ContextFull on_full = ContextFull::Stop)
      : WindowGenerator(generator_labels(model).who, generator_labels(model).start_token,
                        (model.cfg.validate(), model.cfg.max_seq_len), model.cfg.vocab_size, on_full),
        m_(model),
        cache_(kv_cache_shape(model)) {}
  CachedGenerator(const CachedGenerator&) = delete;
  CachedGenerator& operator=(const CachedGenerator&) = delete;

  // Bytes reserved for the cache, the residual stream and scratch.
  std::size_t planned_bytes() const override { return cache_.bytes(); }

 private:
  Tensor run_prompt(std::span<const std::int32_t> tokens, bool want_logits) override {
    ArenaScope scope(cache_.scratch());
    cache_.begin(0);
    const Tensor logits = m_.decode(Tokens(tokens.data(), 1, static_cast<int>(tokens.size())), cache_);
    return want_logits ? Tensor(logits.raw(), {logits.shape()[-1]}) : Tensor();
  }
  Tensor decode_one(std::int32_t token) override {
    ArenaScope scope(cache_.scratch());
    cache_.begin(length());
    tokens_.push_back(token);  // within the reserved capacity
    const Tensor logits = m_.decode(Tokens(&tokens_.back(), 1, 1), cache_);
    return Tensor(logits.raw(), {logits.shape()[-1]});
  }

  const M& m_;
  KvCache cache_;
};

}  // namespace llmcc::models
