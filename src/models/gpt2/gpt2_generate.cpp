// GPT-2's KV-cache sizes and gpt2_sample().
#include "models/gpt2/gpt2_generate.h"

#include <algorithm>

#include "llmcc/error.h"

namespace llmcc::models {

KvCacheShape kv_cache_shape(const Gpt2& model) {
  const Gpt2Config& c = model.cfg;
  if (static_cast<int>(model.h.size()) != c.n_layer || !model.wte.defined() || !model.wpe.defined())
    fail("gpt2 generate", "the model has no weights bound (build it with make_gpt2 or load_gpt2)");
  const std::int64_t T = c.max_seq_len, C = c.n_embd;
  // One block's temporaries for n rows, allocation by allocation as Gpt2Block::decode makes them:
  // ln_1, c_attn (3C wide), attention (and the scores of a single-query attention), c_proj, +,
  // ln_2, c_fc, gelu, c_proj, +.
  const auto block = [&](std::int64_t n) {
    return 7 * arena_floats_bytes(n * C) + arena_floats_bytes(n * 3 * C) + 2 * arena_floats_bytes(n * 4 * C) +
           arena_floats_bytes(std::int64_t{c.n_head} * T);
  };
  // The LM head of one row: ln_f and the logits.
  const std::size_t head = arena_floats_bytes(C) + arena_floats_bytes(c.padded_vocab_size);
  // The largest of: a prefill layer, a decode layer, the embedding, the LM head row.
  return {c.n_layer, c.max_seq_len, C, C, std::max({block(T), block(1), arena_floats_bytes(T * C), head})};
}

GeneratorLabels generator_labels(const Gpt2&) { return {"gpt2 generate", "<|endoftext|>"}; }

std::vector<std::int32_t> gpt2_sample(const Gpt2& m, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                      const SamplingConfig& cfg, Rng& rng) {
  Gpt2Generator gen(m, ContextFull::Slide);
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(std::max(max_new_tokens, 0)));
  generate(gen, prompt, max_new_tokens, cfg, rng, [&](std::int32_t id) { out.push_back(id); });
  return out;
}

}  // namespace llmcc::models
