// Text generation for Llama: a plain full-forward sampler (no KV cache yet).
//
// Every new token runs Llama::forward over the whole current window (the prompt and the tokens
// drawn so far, cropped to the last max_seq_len as nanoGPT does) and samples from the last
// row's logits with nn::Sampler. A token costs a full forward of the window: fine for the
// trainer's periodic samples and short generations on small models; a KV cache like GPT-2's
// (nn/gpt2_generate.h) is the way to make long generation fast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "llmcc/train/rng.h"
#include "nn/gpt2_generate.h"  // SamplingConfig, Sampler
#include "nn/llama.h"

namespace llmcc::nn {

// Bytes of arena a forward of (B, T) tokens needs (activations and logits; no backward).
std::size_t llama_forward_bytes(const LlamaConfig& c, int B, int T);

// Returns the new tokens only (not the prompt): max_new_tokens of them, fewer only when
// cfg.stop_at_eot ends it (the eot is included). An empty prompt starts from cfg.eot (Llama's
// BOS, id 1, for SentencePiece vocabularies). on_token, when set, sees each id as it is drawn.
// Throws llmcc::Error for an id outside [0, vocab_size). Plans one arena per call.
std::vector<std::int32_t> llama_sample(const Llama& m, const std::vector<std::int32_t>& prompt,
                                       int max_new_tokens, const SamplingConfig& cfg, Rng& rng,
                                       const std::function<void(std::int32_t)>& on_token = {});

}  // namespace llmcc::nn
