// Text generation for Llama with a KV cache.
//
// The prompt is run once (prefill: the model's own ops over all its tokens, keeping each layer's
// rotated keys and its values); after that each new token costs one position: per layer RMSNorm,
// the q, k, v projections of one row, RoPE at the token's absolute position, a single-query
// grouped-query attention over the cached keys and values (nn/kv_attention.h), the output
// projection, RMSNorm and the SwiGLU MLP of one row, and the LM head for that row. Logits equal
// Llama::forward over the whole sequence (tests/unit/test_llama_generate.cpp).
//
//   LlamaGenerator gen(model, ContextFull::Slide);  // plans the cache and scratch memory once
//   GenerateStats st = generate(gen, prompt, 200, cfg, rng, on_token);   // nn/generate.h
//
// Memory: the cache (K and V, (L, maxT, NKV * HS) each, NKV * HS = n_kv_head * head size) and the
// scratch for a full-length prefill come from one arena each, sized in the constructor; a decode
// step allocates nothing from the heap.
//
// Context limit: as Gpt2Generator (nn/gpt2_generate.h). With ContextFull::Stop, generate() ends
// when the sequence holds max_seq_len tokens and step() on a full generator throws; with
// ContextFull::Slide the window moves by one token: the cache is recomputed for the last
// max_seq_len - 1 tokens at positions 0.., then the new token is appended, which is exactly
// Llama::forward over the last max_seq_len tokens (the crop llama_sample_uncached makes). RoPE
// keys are rotated by absolute position, so a slide re-runs the prefill (once per token).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "llmcc/arena.h"
#include "llmcc/tensor.h"
#include "llmcc/train/rng.h"
#include "models/generate.h"  // SamplingConfig, Sampler, ContextFull, Generator, generate()
#include "models/llama/llama.h"

namespace llmcc::models {

class LlamaGenerator final : public WindowGenerator {
 public:
  // The model must outlive the generator. Plans and reserves all memory (planned_bytes()).
  explicit LlamaGenerator(const Llama& model, ContextFull on_full = ContextFull::Stop);
  ~LlamaGenerator() override;
  LlamaGenerator(const LlamaGenerator&) = delete;
  LlamaGenerator& operator=(const LlamaGenerator&) = delete;

  // prefill() and step() (WindowGenerator) return a (V) row of logits.
  // Bytes reserved for the cache, the residual stream and scratch.
  std::size_t planned_bytes() const override;

 private:
  Tensor run_prompt(std::span<const std::int32_t> tokens, bool want_logits) override;
  Tensor decode_one(std::int32_t token) override;

  const Llama& m_;
  int L_, C_, NH_, NKV_, HS_, maxT_, V_;
  Arena state_;      // k_cache, v_cache, residual: sized once
  Arena scratch_;    // per layer (prefill) or per token (decode) temporaries, reset each time
  Tensor k_cache_;   // (L, maxT, NKV * HS): keys after RoPE
  Tensor v_cache_;   // (L, maxT, NKV * HS)
  Tensor residual_;  // (maxT, C): the residual stream between layers
};

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
