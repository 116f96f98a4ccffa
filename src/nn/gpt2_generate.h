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
#include "nn/gpt2.h"

namespace llmcc::nn {

struct SamplingConfig {
  float temperature = 1.0f;  // 0: greedy (argmax); otherwise softmax(logits / temperature)
  int top_k = 0;             // sample among the k most likely tokens; 0: all of them
  bool stop_at_eot = false;  // generation ends when eot is produced (it is still returned)
  std::int32_t eot = 50256;  // GPT-2's <|endoftext|>; also the start token of an empty prompt
  // Throws llmcc::Error naming the field (temperature < 0 or not finite, top_k < 0).
  void validate() const;
};

// Draws token ids from logits, over ids [0, vocab_size) only: the padded rows of the LM head
// (vocab_size..Vp) are never chosen. Keeps its scratch so a draw allocates nothing.
//   temperature 0: the first id of largest logit; no random number is drawn.
//   otherwise:     p_i ~ exp((l_i - max) / temperature) over the kept ids (all, or the top_k with
//                  ties at the k-th value broken by lower id), then one rng.uniform_f64() draw
//                  picks by cumulative probability in id order. So top_k = 1 is greedy.
class Sampler {
 public:
  explicit Sampler(int vocab_size);
  // logits: at least vocab_size values (a (Vp) row of the LM head).
  std::int32_t sample(std::span<const float> logits, const SamplingConfig& cfg, Rng& rng);
  std::int32_t sample(const Tensor& logits, const SamplingConfig& cfg, Rng& rng);
  int vocab_size() const { return vocab_size_; }

 private:
  int vocab_size_;
  std::vector<float> values_;  // (V) scratch for the k-th largest logit
  std::vector<double> probs_;  // (V) unnormalised probabilities of the kept ids
};

enum class ContextFull { Stop, Slide };

class Gpt2Generator {
 public:
  // The model must outlive the generator. Plans and reserves all memory (reported by
  // planned_bytes()).
  explicit Gpt2Generator(const Gpt2& model, ContextFull on_full = ContextFull::Stop);
  ~Gpt2Generator();
  Gpt2Generator(const Gpt2Generator&) = delete;
  Gpt2Generator& operator=(const Gpt2Generator&) = delete;

  // Forgets the previous sequence, runs the prompt (1 to max_seq_len ids, each in
  // [0, vocab_size)) and returns the logits of the token after it: (Vp), valid until the next
  // prefill() or step(). Throws llmcc::Error for an empty or too long prompt or a bad id.
  Tensor prefill(std::span<const std::int32_t> prompt);
  // Appends one token and returns the logits of the next: (Vp). On a full sequence: Slide moves
  // the window (see the top of this file), Stop throws llmcc::Error.
  Tensor step(std::int32_t token);

  int length() const { return static_cast<int>(tokens_.size()); }  // tokens in the cache
  int max_length() const { return maxT_; }                         // max_seq_len
  int vocab_size() const { return V_; }                            // ids a token may take
  bool full() const { return length() >= maxT_; }
  ContextFull on_full() const { return on_full_; }
  // The tokens whose keys and values are cached (the current window), oldest first.
  const std::vector<std::int32_t>& tokens() const { return tokens_; }
  // Bytes reserved for the cache, the residual stream and scratch.
  std::size_t planned_bytes() const;
  // Times the window has slid.
  std::int64_t slides() const { return slides_; }

 private:
  Tensor run_prompt(std::span<const std::int32_t> prompt, bool want_logits);
  Tensor decode_one(std::int32_t token);
  void check_token(std::int32_t token, const char* what) const;

  const Gpt2& m_;
  ContextFull on_full_;
  int L_, C_, NH_, maxT_, V_, Vp_;
  Arena state_;      // k_cache, v_cache, residual: sized once
  Arena scratch_;    // per layer (prefill) or per token (decode) temporaries, reset each time
  Tensor k_cache_;   // (L, maxT, C)
  Tensor v_cache_;   // (L, maxT, C)
  Tensor residual_;  // (maxT, C): the residual stream between layers
  std::vector<std::int32_t> tokens_;  // capacity maxT, reserved up front
  std::int64_t slides_ = 0;
};

// Timings and how a generate() call ended.
struct GenerateStats {
  int prompt_tokens = 0;
  int new_tokens = 0;
  int decode_steps = 0;        // step() calls: new_tokens - 1 (the last token is never fed back)
  double prefill_seconds = 0;  // the prompt's prefill, up to its logits
  double decode_seconds = 0;   // every sampling and step() after the prefill
  bool stopped_at_eot = false;
  bool stopped_at_limit = false;  // ContextFull::Stop and the sequence reached max_seq_len
};

// Prefills `prompt` (empty: starts from cfg.eot), then samples up to max_new_tokens, calling
// on_token (if set) with each new id as soon as it is chosen. Ends early at eot when
// cfg.stop_at_eot (the eot is passed to on_token and counted) or, under ContextFull::Stop, when
// the sequence is full.
GenerateStats generate(Gpt2Generator& gen, std::span<const std::int32_t> prompt, int max_new_tokens,
                       const SamplingConfig& cfg, Rng& rng,
                       const std::function<void(std::int32_t)>& on_token = {});

// One call for the trainer's periodic samples: returns the new tokens only (not the prompt), at
// most max_new_tokens (fewer only when cfg.stop_at_eot ends it; the window slides when the
// context fills). An empty prompt starts from cfg.eot. Plans a generator per call.
std::vector<std::int32_t> gpt2_sample(const Gpt2& m, const std::vector<std::int32_t>& prompt,
                                      int max_new_tokens, const SamplingConfig& cfg, Rng& rng);

}  // namespace llmcc::nn
