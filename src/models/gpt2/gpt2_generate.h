// Text generation for GPT-2 with a KV cache: Gpt2::decode (gpt2.h) on CachedGenerator
// (cached_generator.h), which says how the prompt, the cache and a full context are handled.
//
//   Gpt2Generator gen(model);                    // plans the cache and scratch memory once
//   Sampler sampler(model.cfg.vocab_size);
//   Rng rng(seed);
//   Tensor logits = gen.prefill(prompt);         // (Vp), the next token's logits
//   for (int i = 0; i < n && !gen.full(); ++i) logits = gen.step(sampler.sample(logits, cfg, rng));
//
// or one call: gpt2_sample(model, prompt, 64, cfg, rng). The cache holds K and V, (L, maxT, C)
// each; logits equal Gpt2::forward over the whole sequence (tests/models/test_gpt2_generate.cpp).
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
#include "models/cached_generator.h"
#include "models/generate.h"  // SamplingConfig, Sampler, ContextFull, Generator, generate()
#include "models/gpt2/gpt2.h"

namespace llmcc::models {

// GPT-2's cached decoder (cached_generator.h): prefill() and step() return a (Vp) row of logits,
// the padded LM head's.
using Gpt2Generator = CachedGenerator<Gpt2>;
KvCacheShape kv_cache_shape(const Gpt2& model);
GeneratorLabels generator_labels(const Gpt2& model);

// One call for the trainer's periodic samples: returns the new tokens only (not the prompt), at
// most max_new_tokens (fewer only when cfg.stop_at_eot ends it; the window slides when the
// context fills). An empty prompt starts from cfg.eot. Plans a generator per call.
std::vector<std::int32_t> gpt2_sample(const Gpt2& m, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                      const SamplingConfig& cfg, Rng& rng);

}  // namespace llmcc::models
