#include "models/qwen3/qwen3_generate.h"

#include <algorithm>

#include "llmcc/error.h"

namespace llmcc::models {

KvCacheShape kv_cache_shape(const Qwen3& model) {
  const Qwen3Config& c = model.cfg;
  if (static_cast<int>(model.model.layers.size()) != c.n_layer || !model.model.embed_tokens.defined() ||
      (!c.tie_embeddings && (model.lm_head.size() != 1 || !model.lm_head[0].w.defined())))
    fail("qwen3 generate", "the model has no weights bound (build it with make_qwen3 or load_qwen3)");
  const std::int64_t C = c.n_embd, D = c.head_dim, Q = std::int64_t{c.n_head} * D;
  const std::int64_t KV = std::int64_t{c.n_kv_head} * D, F = c.hidden_dim;
  // One block's temporaries for n rows, allocation by allocation as Qwen3Block::decode makes
  // them: input_layernorm; q_proj, q_norm, rope (q and its cos and sin tables); k_proj, k_norm,
  // rope (k, tables); v_proj; attention (or, decoding, its output and the (NH, n_scores)
  // scores); o_proj, +; post_attention_layernorm; gate_proj, silu, up_proj, *, down_proj, +.
  const auto block = [&](std::int64_t n, std::int64_t n_scores) {
    return 6 * arena_floats_bytes(n * C) + 4 * arena_floats_bytes(n * Q) + 4 * arena_floats_bytes(n * KV) +
           4 * arena_floats_bytes(n * D / 2) + 4 * arena_floats_bytes(n * F) +
           arena_floats_bytes(std::int64_t{c.n_head} * n_scores);
  };
  const std::size_t embedding = arena_floats_bytes(std::int64_t{c.max_seq_len} * C);
  const std::size_t head = arena_floats_bytes(C) + arena_floats_bytes(c.vocab_size);
  return {c.n_layer, c.max_seq_len, KV, C,
          std::max({block(c.max_seq_len, 0), block(1, c.max_seq_len), embedding, head})};
}

GeneratorLabels generator_labels(const Qwen3&) { return {"qwen3 generate", "BOS"}; }

}  // namespace llmcc::models
