// Text generation for Llama with a KV cache: Llama::decode (llama.h) on CachedGenerator
// (cached_generator.h), which says how the prompt, the cache and a full context are handled. The
// cache holds the rotated keys and the values, (L, maxT, NKV * HS) each (NKV * HS = n_kv_head *
// head size); RoPE rotates by absolute position, so a slide re-runs the prefill. Logits equal
// Llama::forward over the whole sequence (tests/models/test_llama_generate.cpp).
//
//   LlamaGenerator gen(model, ContextFull::Slide);  // plans the cache and scratch memory once
//   GenerateStats st = generate(gen, prompt, 200, cfg, rng, on_token);   // models/generate.h
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/tensor.h"
#include "llmcc/train/rng.h"
#include "models/cached_generator.h"
#include "models/generate.h"  // SamplingConfig, Sampler, ContextFull, Generator, generate()
#include "models/llama/llama.h"

namespace llmcc::models {

// Llama's cached decoder (cached_generator.h): prefill() and step() return a (V) row of logits.
using LlamaGenerator = CachedGenerator<Llama>;
KvCacheShape kv_cache_shape(const Llama& model);
GeneratorLabels generator_labels(const Llama& model);

// Returns the new tokens only (not the prompt): max_new_tokens of them, fewer only when
// cfg.stop_at_eot ends it (the eot is included). An empty prompt starts from cfg.eot (Llama's
// BOS, id 1, for SentencePiece vocabularies). on_token, when set, sees each id as it is drawn.
// The window slides when the context fills; a prompt longer than the context is cropped to its
// last max_seq_len tokens. Runs on a LlamaGenerator (planned per call).
// Throws llmcc::Error for an id outside [0, vocab_size).
std::vector<std::int32_t> llama_sample(const Llama& m, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                       const SamplingConfig& cfg, Rng& rng,
                                       const std::function<void(std::int32_t)>& on_token = {});

// The same draws without a cache: every token runs Llama::forward over the whole window (the
// last max_seq_len tokens). The reference the cached path is tested against, and the baseline
// of its speedup; a token costs a full forward of the window.
std::vector<std::int32_t> llama_sample_uncached(const Llama& m, const std::vector<std::int32_t>& prompt,
                                                int max_new_tokens, const SamplingConfig& cfg, Rng& rng,
                                                const std::function<void(std::int32_t)>& on_token = {});

// Bytes of arena a forward of (B, T) tokens needs (activations and logits; no backward).
std::size_t llama_forward_bytes(const LlamaConfig& c, int B, int T);

}  // namespace llmcc::models
