// LlamaGenerator (prefill + KV-cache decode), llama_sample and the uncached reference sampler.
#include "models/llama/llama_generate.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "llmcc/error.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/rope.h"
#include "models/kv_attention.h"

namespace llmcc::models {

namespace {

constexpr const char* kGen = "llama generate";

// Bytes one arena allocation of n floats takes (arenas round every request up to 64 bytes).
std::size_t arena_bytes(std::int64_t n) {
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  return (bytes + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
}

// One block's temporaries for T rows, allocation by allocation as run_prompt and decode_one make
// them: attention_norm; wq, rope (q, then its cos and sin tables); wk, rope (k, tables); wv;
// attention (or, decoding, its output and the (NH, n) scores); wo, +; ffn_norm; w1, silu, w3, *,
// w2, +. C wide: the two norms, wo, w2 and the two sums.
std::size_t block_scratch_bytes(const LlamaConfig& c, std::int64_t T, std::int64_t n_scores) {
  const std::int64_t C = c.n_embd, HS = c.head_dim(), Q = std::int64_t{c.n_head} * HS;
  const std::int64_t KV = std::int64_t{c.n_kv_head} * HS, F = c.hidden_dim;
  const std::size_t tables = 4 * arena_bytes(T * HS / 2);
  return 6 * arena_bytes(T * C) + 3 * arena_bytes(T * Q) + 3 * arena_bytes(T * KV) + tables + 4 * arena_bytes(T * F) +
         arena_bytes(std::int64_t{c.n_head} * n_scores);
}

}  // namespace

// ---- the generator ----------------------------------------------------------------------------

LlamaGenerator::LlamaGenerator(const Llama& model, ContextFull on_full)
    : WindowGenerator(kGen, "BOS", (model.cfg.validate(), model.cfg.max_seq_len), model.cfg.vocab_size,
                      on_full),  // validated before any size below is computed from it
      m_(model),
      L_(model.cfg.n_layer),
      C_(model.cfg.n_embd),
      NH_(model.cfg.n_head),
      NKV_(model.cfg.n_kv_head),
      HS_(model.cfg.head_dim()),
      maxT_(model.cfg.max_seq_len),
      V_(model.cfg.vocab_size),
      state_([&] {
        const LlamaConfig& c = model.cfg;
        const std::int64_t KV = std::int64_t{c.n_kv_head} * c.head_dim();
        return 2 * arena_bytes(std::int64_t{c.n_layer} * c.max_seq_len * KV) +
               arena_bytes(std::int64_t{c.max_seq_len} * c.n_embd);
      }()),
      scratch_([&] {
        const LlamaConfig& c = model.cfg;
        // The largest of: a prefill layer, a decode layer, the LM head row (final norm, logits).
        const std::size_t head = arena_bytes(c.n_embd) + arena_bytes(c.vocab_size);
        return std::max({block_scratch_bytes(c, c.max_seq_len, 0), block_scratch_bytes(c, 1, c.max_seq_len), head});
      }()) {
  if (static_cast<int>(model.layers.size()) != L_ || !model.tok_embeddings.defined() || !model.output.defined())
    fail(kGen, "the model has no weights bound (build it with make_llama or load_llama)");
  const int KV = NKV_ * HS_;
  // Uninitialised: a cache row is always written before it is read, and untouched pages cost
  // nothing, so a short generation with a long-context model stays cheap.
  k_cache_ = state_.tensor({L_, maxT_, KV}, "k cache");  // (L, maxT, NKV * HS)
  v_cache_ = state_.tensor({L_, maxT_, KV}, "v cache");  // (L, maxT, NKV * HS)
  residual_ = state_.tensor({maxT_, C_}, "residual");    // (maxT, C)
}

LlamaGenerator::~LlamaGenerator() = default;

std::size_t LlamaGenerator::planned_bytes() const { return state_.capacity() + scratch_.capacity(); }

// Runs tokens (the whole cached sequence, from position 0) through the model's own ops, as
// Llama::forward does, filling the cache rows 0..T-1; returns the last row's logits (V) when asked.
Tensor LlamaGenerator::run_prompt(std::span<const std::int32_t> tokens, bool want_logits) {
  const int T = static_cast<int>(tokens.size());
  const std::int64_t KV = std::int64_t{NKV_} * HS_;
  const std::int64_t layer = std::int64_t{maxT_} * KV;  // one layer of the cache
  ArenaScope scope(scratch_);
  for (int t = 0; t < T; ++t)  // the embedding: a row copy per token
    std::memcpy(residual_.f32() + std::int64_t{t} * C_, m_.tok_embeddings.f32() + std::int64_t{tokens[t]} * C_,
                static_cast<std::size_t>(C_) * sizeof(float));
  for (int l = 0; l < L_; ++l) {
    scratch_.reset();  // each layer's temporaries replace the previous layer's
    const LlamaBlock& b = m_.layers[l];
    const LlamaAttention& at = b.attention;
    const Tensor x(residual_.f32(), {1, T, C_});                                     // (1, T, C)
    const Tensor a = b.attention_norm.forward(x);                                    // (1, T, C)
    const Tensor q = rope(linear_nobias(a, at.wq), at.n_head, at.rope_freqs, 0);     // (1, T, NH * HS)
    const Tensor k = rope(linear_nobias(a, at.wk), at.n_kv_head, at.rope_freqs, 0);  // (1, T, NKV * HS)
    const Tensor v = linear_nobias(a, at.wv);                                        // (1, T, NKV * HS)
    std::memcpy(k_cache_.f32() + l * layer, k.f32(), k.nbytes());                    // rows 0..T-1 of (maxT, NKV * HS)
    std::memcpy(v_cache_.f32() + l * layer, v.f32(), v.nbytes());
    const Tensor h = x + linear_nobias(attention(q, k, v, at.n_head, at.n_kv_head), at.wo);  // (1, T, C)
    const Tensor out = h + b.feed_forward.forward(b.ffn_norm.forward(h));                    // (1, T, C)
    std::memcpy(residual_.f32(), out.f32(), out.nbytes());
  }
  if (!want_logits) return {};
  scratch_.reset();
  const Tensor last(residual_.f32() + std::int64_t{T - 1} * C_, {1, 1, C_});  // (1, 1, C)
  const Tensor logits = linear_nobias(m_.norm.forward(last), m_.output);      // (1, 1, V)
  return Tensor(logits.raw(), {V_});
}

// One new position: the block's ops on (1, 1, C), RoPE at position pos, attention over the cache
// rows 0..pos.
Tensor LlamaGenerator::decode_one(std::int32_t token) {
  const int pos = length();
  LLMCC_ASSERT(pos < maxT_, "decode_one on a full sequence");
  const std::int64_t KV = std::int64_t{NKV_} * HS_;
  const std::int64_t layer = std::int64_t{maxT_} * KV;  // one layer of the cache
  ArenaScope scope(scratch_);
  float* x0 = residual_.f32();  // (C): row 0 carries the one position
  std::memcpy(x0, m_.tok_embeddings.f32() + std::int64_t{token} * C_, static_cast<std::size_t>(C_) * sizeof(float));
  for (int l = 0; l < L_; ++l) {
    scratch_.reset();
    const LlamaBlock& b = m_.layers[l];
    const LlamaAttention& at = b.attention;
    const Tensor x(x0, {1, 1, C_});                                                    // (1, 1, C)
    const Tensor a = b.attention_norm.forward(x);                                      // (1, 1, C)
    const Tensor q = rope(linear_nobias(a, at.wq), at.n_head, at.rope_freqs, pos);     // (1, 1, NH * HS)
    const Tensor k = rope(linear_nobias(a, at.wk), at.n_kv_head, at.rope_freqs, pos);  // (1, 1, NKV * HS)
    const Tensor v = linear_nobias(a, at.wv);                                          // (1, 1, NKV * HS)
    float* kc = k_cache_.f32() + l * layer;                                            // (maxT, NKV * HS)
    float* vc = v_cache_.f32() + l * layer;                                            // (maxT, NKV * HS)
    std::memcpy(kc + pos * KV, k.f32(), k.nbytes());
    std::memcpy(vc + pos * KV, v.f32(), v.nbytes());
    const Tensor y = new_tensor({1, 1, std::int64_t{NH_} * HS_}, "kv attention");  // (1, 1, NH * HS)
    const Tensor scores = new_tensor({NH_, pos + 1}, "kv attention");              // (NH, pos + 1)
    attention_single_query(y.f32(), q.f32(), kc, vc, pos + 1, NH_, NKV_, HS_, KV, scores.f32());
    const Tensor h = x + linear_nobias(y, at.wo);                          // (1, 1, C)
    const Tensor out = h + b.feed_forward.forward(b.ffn_norm.forward(h));  // (1, 1, C)
    std::memcpy(x0, out.f32(), out.nbytes());
  }
  tokens_.push_back(token);  // within the reserved capacity
  scratch_.reset();
  const Tensor logits = linear_nobias(m_.norm.forward(Tensor(x0, {1, 1, C_})), m_.output);  // (1, 1, V)
  return Tensor(logits.raw(), {V_});
}

// ---- whole generations ------------------------------------------------------------------------

std::vector<std::int32_t> llama_sample(const Llama& m, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                       const SamplingConfig& cfg, Rng& rng,
                                       const std::function<void(std::int32_t)>& on_token) {
  LlamaGenerator gen(m, ContextFull::Slide);
  for (const std::int32_t id : prompt) gen.check_token(id, "prompt");
  // A prompt longer than the context: its last max_seq_len tokens, the window the uncached path
  // crops to.
  std::span<const std::int32_t> window(prompt);
  if (window.size() > static_cast<std::size_t>(gen.max_length())) window = window.last(gen.max_length());
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(std::max(max_new_tokens, 0)));
  generate(gen, window, max_new_tokens, cfg, rng, [&](std::int32_t id) {
    out.push_back(id);
    if (on_token) on_token(id);
  });
  return out;
}

std::size_t llama_forward_bytes(const LlamaConfig& c, int B, int T) {
  // Floats per token a forward keeps live (the arena is not reset between layers): per layer the
  // two RMSNorm outputs, q and k before and after RoPE, v, the attention output, two projections,
  // two residual sums (C, Q and KV wide) and the MLP's four F-wide tensors; then the final norm and
  // the (V) logits row.
  const double BT = static_cast<double>(B) * T, C = c.n_embd, F = c.hidden_dim;
  const double Q = C, KV = static_cast<double>(c.n_kv_head) * c.head_dim();
  const double per_layer = BT * (6.0 * C + 3.0 * Q + 3.0 * KV + 4.0 * F) + 4.0 * BT + double(B) * c.n_head * T;
  const double floats = c.n_layer * per_layer + 2.0 * BT * C + BT * c.vocab_size;
  return static_cast<std::size_t>(4.0 * floats) + (std::size_t{16} << 20);
}

std::vector<std::int32_t> llama_sample_uncached(const Llama& m, const std::vector<std::int32_t>& prompt,
                                                int max_new_tokens, const SamplingConfig& cfg, Rng& rng,
                                                const std::function<void(std::int32_t)>& on_token) {
  cfg.validate();
  const int V = m.cfg.vocab_size, maxT = m.cfg.max_seq_len;
  if (max_new_tokens < 0) fail("llama_sample", "max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
  std::vector<std::int32_t> seq = prompt.empty() ? std::vector<std::int32_t>{cfg.eot} : prompt;
  for (const std::int32_t id : seq)
    if (id < 0 || id >= V)
      fail("llama_sample",
           "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  const std::size_t prompt_len = seq.size();
  seq.reserve(prompt_len + static_cast<std::size_t>(max_new_tokens));
  Sampler sampler(V);
  Arena arena(llama_forward_bytes(m.cfg, 1, maxT));
  for (int i = 0; i < max_new_tokens; ++i) {
    // The window: the last max_seq_len tokens.
    const std::size_t start = seq.size() > static_cast<std::size_t>(maxT) ? seq.size() - maxT : 0;
    const int T = static_cast<int>(seq.size() - start);
    arena.reset();
    std::int32_t next = 0;
    {
      ArenaScope scope(arena);
      const Tensor logits = m.forward(Tokens(seq.data() + start, 1, T));  // (1, T, V)
      next = sampler.sample(std::span<const float>(logits.f32() + static_cast<std::size_t>(T - 1) * V, V), cfg, rng);
    }
    seq.push_back(next);
    if (on_token) on_token(next);
    if (cfg.stop_at_eot && (next == cfg.eot || next == cfg.document_start)) break;
  }
  return std::vector<std::int32_t>(seq.begin() + static_cast<std::ptrdiff_t>(prompt_len), seq.end());
}

}  // namespace llmcc::models
