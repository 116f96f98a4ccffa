// Llama's KV-cache sizes, llama_sample and the uncached reference sampler.
#include "models/llama/llama_generate.h"

#include <algorithm>
#include <string>

#include "llmcc/error.h"

namespace llmcc::models {

KvCacheShape kv_cache_shape(const Llama& model) {
  const LlamaConfig& c = model.cfg;
  if (static_cast<int>(model.layers.size()) != c.n_layer || !model.tok_embeddings.defined() ||
      (!c.tie_embeddings && (model.output.size() != 1 || !model.output[0].w.defined())))
    fail("llama generate", "the model has no weights bound (build it with make_llama or load_llama)");
  const std::int64_t C = c.n_embd, HS = c.head_dim(), Q = std::int64_t{c.n_head} * HS;
  const std::int64_t KV = std::int64_t{c.n_kv_head} * HS, F = c.hidden_dim;
  // One block's temporaries for n rows, allocation by allocation as LlamaBlock::decode makes
  // them: attention_norm; wq, rope (q, then its cos and sin tables); wk, rope (k, tables); wv;
  // attention (or, decoding, its output and the (NH, n_scores) scores); wo, +; ffn_norm; w1,
  // silu, w3, *, w2, +. C wide: the two norms, wo, w2 and the two sums.
  const auto block = [&](std::int64_t n, std::int64_t n_scores) {
    return 6 * arena_floats_bytes(n * C) + 3 * arena_floats_bytes(n * Q) + 3 * arena_floats_bytes(n * KV) +
           4 * arena_floats_bytes(n * HS / 2) + 4 * arena_floats_bytes(n * F) +
           arena_floats_bytes(std::int64_t{c.n_head} * n_scores);
  };
  // The embedding of a prompt; the LM head row (final norm, logits).
  const std::size_t embedding = arena_floats_bytes(std::int64_t{c.max_seq_len} * C);
  const std::size_t head = arena_floats_bytes(C) + arena_floats_bytes(c.vocab_size);
  return {c.n_layer, c.max_seq_len, KV, C,
          std::max({block(c.max_seq_len, 0), block(1, c.max_seq_len), embedding, head})};
}

GeneratorLabels generator_labels(const Llama&) { return {"llama generate", "BOS"}; }

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
