// Sampling and the generation loop shared by the models' cached generators (GPT-2's in
// nn/gpt2_generate.h, Llama's in nn/llama_generate.h).
//
//   Sampler sampler(gen.vocab_size());
//   Tensor logits = gen.prefill(prompt);         // the next token's logits
//   for (int i = 0; i < n && !gen.full(); ++i) logits = gen.step(sampler.sample(logits, cfg, rng));
//
// or generate(gen, prompt, n, cfg, rng, on_token), which also times prefill and decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "llmcc/tensor.h"
#include "llmcc/train/rng.h"

namespace llmcc::models {

struct SamplingConfig {
  float temperature = 1.0f;  // 0: greedy (argmax); otherwise softmax(logits / temperature)
  int top_k = 0;             // sample among the k most likely tokens; 0: all of them
  bool stop_at_eot = false;  // generation ends when eot is produced (it is still returned)
  std::int32_t eot = 50256;  // GPT-2's <|endoftext|>; also the start token of an empty prompt
  // With stop_at_eot, this id ends generation too (-1: none): the id prepared data puts before
  // every document (SentencePiece's bos, as llmcc prepare writes it), which a model trained on
  // such data emits where a document ends, while eot is the tokenizer's eos that it never saw.
  std::int32_t document_start = -1;
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

// What generate() drives: a model's cached decoder (Gpt2Generator, LlamaGenerator).
class Generator {
 public:
  virtual ~Generator() = default;
  // Forgets the previous sequence, runs the prompt (1 to max_length() ids, each in
  // [0, vocab_size())) and returns the next token's logits (at least vocab_size() values), valid
  // until the next prefill() or step().
  virtual Tensor prefill(std::span<const std::int32_t> prompt) = 0;
  // Appends one token and returns the next token's logits. On a full sequence: ContextFull::Slide
  // moves the window by one token, Stop throws llmcc::Error.
  virtual Tensor step(std::int32_t token) = 0;
  virtual int length() const = 0;      // tokens in the cache
  virtual int max_length() const = 0;  // the model's context (max_seq_len)
  virtual int vocab_size() const = 0;  // ids a token may take
  virtual ContextFull on_full() const = 0;
  // Bytes reserved for the cache, the residual stream and scratch.
  virtual std::size_t planned_bytes() const = 0;
  // Times the window has slid (ContextFull::Slide; each a prefill).
  virtual std::int64_t slides() const = 0;
  bool full() const { return length() >= max_length(); }
};

// The token window both cached decoders share (Gpt2Generator, LlamaGenerator): the tokens in
// the cache, the checks on a prompt and on each id, and what a full window does. A model
// supplies run_prompt (the whole window from position 0, filling the cache) and decode_one (one
// more position; it appends the token to tokens_).
class WindowGenerator : public Generator {
 public:
  // Forgets the previous sequence, runs the prompt (1 to max_length() ids, each in
  // [0, vocab_size())) and returns the logits of the token after it, valid until the next
  // prefill() or step(). Throws llmcc::Error for an empty or too long prompt or a bad id.
  Tensor prefill(std::span<const std::int32_t> prompt) final;
  // Appends one token and returns the logits of the next. On a full window: Slide keeps the last
  // max_length() - 1 tokens, recomputes their cache from position 0 and appends (a prefill per
  // slide); Stop throws llmcc::Error.
  Tensor step(std::int32_t token) final;

  int length() const final { return static_cast<int>(tokens_.size()); }
  int max_length() const final { return max_length_; }
  int vocab_size() const final { return vocab_size_; }
  ContextFull on_full() const final { return on_full_; }
  std::int64_t slides() const final { return slides_; }
  // The tokens whose keys and values are cached (the current window), oldest first.
  const std::vector<std::int32_t>& tokens() const { return tokens_; }
  // Throws llmcc::Error naming `what` ("prompt", "next") for an id outside [0, vocab_size()).
  void check_token(std::int32_t token, const char* what) const;

 protected:
  // who: the name errors start with ("gpt2 generate"); start_token: what an empty prompt lacks,
  // for its error ("<|endoftext|>"). Reserves the window (no allocation after this).
  WindowGenerator(const char* who, const char* start_token, int max_length, int vocab_size, ContextFull on_full);
  // tokens: the whole window, from position 0; returns the last row's logits when want_logits.
  virtual Tensor run_prompt(std::span<const std::int32_t> tokens, bool want_logits) = 0;
  // Runs one more position for token (its cache row at length()), appends it to tokens_ and
  // returns the next token's logits.
  virtual Tensor decode_one(std::int32_t token) = 0;

  const char* who_;
  std::vector<std::int32_t> tokens_;  // capacity max_length, reserved up front

 private:
  const char* start_token_;
  int max_length_, vocab_size_;
  ContextFull on_full_;
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
GenerateStats generate(Generator& gen, std::span<const std::int32_t> prompt, int max_new_tokens,
                       const SamplingConfig& cfg, Rng& rng, const std::function<void(std::int32_t)>& on_token = {});

}  // namespace llmcc::models
