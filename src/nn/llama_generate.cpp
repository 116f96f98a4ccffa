#include "nn/llama_generate.h"

#include <algorithm>

#include "llmcc/arena.h"
#include "llmcc/error.h"

namespace llmcc::nn {

std::size_t llama_forward_bytes(const LlamaConfig& c, int B, int T) {
  // Floats per token a forward keeps live (the arena is not reset between layers): per layer the
  // two RMSNorm outputs, q and k before and after RoPE, v, the attention output, two projections,
  // two residual sums (C, Q and KV wide) and the MLP's four F-wide tensors; then the final norm and
  // the (V) logits row.
  const double BT = static_cast<double>(B) * T, C = c.n_embd, F = c.hidden_dim;
  const double Q = C, KV = static_cast<double>(c.n_kv_head) * c.head_dim();
  const double per_layer =
      BT * (6.0 * C + 3.0 * Q + 3.0 * KV + 4.0 * F) + 4.0 * BT + double(B) * c.n_head * T;
  const double floats = c.n_layer * per_layer + 2.0 * BT * C + BT * c.vocab_size;
  return static_cast<std::size_t>(4.0 * floats) + (std::size_t{16} << 20);
}

std::vector<std::int32_t> llama_sample(const Llama& m, const std::vector<std::int32_t>& prompt,
                                       int max_new_tokens, const SamplingConfig& cfg, Rng& rng,
                                       const std::function<void(std::int32_t)>& on_token) {
  cfg.validate();
  const int V = m.cfg.vocab_size, maxT = m.cfg.max_seq_len;
  if (max_new_tokens < 0)
    fail("llama_sample", "max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
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
      next = sampler.sample(std::span<const float>(logits.f32() + static_cast<std::size_t>(T - 1) * V, V),
                            cfg, rng);
    }
    seq.push_back(next);
    if (on_token) on_token(next);
    if (cfg.stop_at_eot && next == cfg.eot) break;
  }
  return std::vector<std::int32_t>(seq.begin() + static_cast<std::ptrdiff_t>(prompt_len), seq.end());
}

}  // namespace llmcc::nn
