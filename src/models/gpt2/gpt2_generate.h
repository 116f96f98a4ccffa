// Text generation for GPT-2 with a KV cache.
//
// The prompt is run once (prefill: the model's own ops over all its tokens, keeping each layer's
// K and V); after that each new token costs one position: embedding, per layer a (1, 1, C)
// layernorm/linear/GELU pass and a single-query attention over the cached keys and values, and
// the LM head for that one row. Logits equal Gpt2::forward over the whole sequence (checked by
// tests/unit/test_gpt2_generate.cpp).
//
//   Gpt2Generator gen(model);                    // plans the cache and scratch memory once
//   Sampler sampler(model.cfg.vocab_size);
//   Rng rng(seed);
//   Tensor logits = gen.prefill(prompt);         // (Vp), the next token's logits
//   for (int i = 0; i < n && !gen.full(); ++i) logits = gen.step(sampler.sample(logits, cfg, rng));
//
// or, for the trainer's periodic samples, one call: gpt2_sample(model, prompt, 64, cfg, rng).
//
// Memory: the cache (K and V, (L, maxT, C) each) and the scratch for a full-length prefill come
// from arenas sized in the constructor; a decode step allocates nothing from the heap.
//
// Context limit: a sequence holds at most max_seq_len tokens (the rows of wpe). With
// ContextFull::Stop, generate() ends there and step() on a full generator throws; with
// ContextFull::Slide the window moves by one token: the cache is recomputed (a prefill) for the
// last max_seq_len - 1 tokens at positions 0.., then the new token is appended, which is exactly
// Gpt2::forward over the last max_seq_len tokens (as nanoGPT crops its context). Sliding costs
// a full prefill per token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/tensor.h"
#include "llmcc/train/rng.h"
#include "models/generate.h"  // SamplingConfig, Sampler, ContextFull, Generator, generate()
#include "models/gpt2/gpt2.h"

namespace llmcc::models {

class Gpt2Generator final : public WindowGenerator {
 public:
  // The model must outlive the generator. Plans and reserves all memory (reported by
  // planned_bytes()).
  explicit Gpt2Generator(const Gpt2& model, ContextFull on_full = ContextFull::Stop);
  ~Gpt2Generator() override;
  Gpt2Generator(const Gpt2Generator&) = delete;
  Gpt2Generator& operator=(const Gpt2Generator&) = delete;

  // prefill() and step() (WindowGenerator) return a (Vp) row of logits: the padded LM head's.
  // Bytes reserved for the cache, the residual stream and scratch.
  std::size_t planned_bytes() const override;

 private:
  Tensor run_prompt(std::span<const std::int32_t> tokens, bool want_logits) override;
  Tensor decode_one(std::int32_t token) override;

  const Gpt2& m_;
  int L_, C_, NH_, maxT_, Vp_;
  Arena state_;      // k_cache, v_cache, residual: sized once
  Arena scratch_;    // per layer (prefill) or per token (decode) temporaries, reset each time
  Tensor k_cache_;   // (L, maxT, C)
  Tensor v_cache_;   // (L, maxT, C)
  Tensor residual_;  // (maxT, C): the residual stream between layers
};

// One call for the trainer's periodic samples: returns the new tokens only (not the prompt), at
// most max_new_tokens (fewer only when cfg.stop_at_eot ends it; the window slides when the
// context fills). An empty prompt starts from cfg.eot. Plans a generator per call.
std::vector<std::int32_t> gpt2_sample(const Gpt2& m, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                      const SamplingConfig& cfg, Rng& rng);

}  // namespace llmcc::models
