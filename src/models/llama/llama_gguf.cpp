#include "models/llama/llama_gguf.h"

#include <cmath>
#include <numbers>
#include <string>

namespace llmcc::models {

namespace {

// llama.cpp's per-frequency divisors for Llama 3's scaling (one per rotary pair): 1 for short
// wavelengths, `factor` for long ones, a smooth blend between (as Hugging Face's llama3 rope).
std::vector<float> llama3_rope_factors(const LlamaConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const int hs = c.head_dim();
  const double old_context = s.original_max_position_embeddings;
  const double low_wavelen = old_context / s.low_freq_factor, high_wavelen = old_context / s.high_freq_factor;
  std::vector<float> factors;
  for (int i = 0; i < hs; i += 2) {
    const double freq = 1.0 / std::pow(static_cast<double>(c.rope_theta), static_cast<double>(i) / hs);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(s.factor);
    } else {
      const double smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / s.factor + smooth)));
    }
  }
  return factors;
}

}  // namespace

GgufModelParts llama_gguf_parts(const Llama& m, const TensorReader& read) {
  const LlamaConfig& c = m.cfg;
  GgufModelParts p =
      gguf_model_parts("llama", {c.max_seq_len, c.n_embd, c.n_layer, c.hidden_dim, c.n_head, c.vocab_size});
  p.set("attention.head_count_kv", static_cast<std::uint32_t>(c.n_kv_head));
  p.set("attention.layer_norm_rms_epsilon", c.norm_eps);
  p.set("rope.freq_base", c.rope_theta);
  p.set("rope.dimension_count", static_cast<std::uint32_t>(c.head_dim()));
  p.set("vocab_size", static_cast<std::uint32_t>(c.vocab_size));

  auto& t = p.tensors;
  t.push_back(gguf_tensor("token_embd.weight", m.tok_embeddings, read));
  for (int l = 0; l < c.n_layer; ++l) {
    const LlamaBlock& b = m.layers[static_cast<std::size_t>(l)];
    const std::string at = "blk." + std::to_string(l) + ".";
    t.push_back(gguf_tensor(at + "attn_norm.weight", b.attention_norm.w, read));
    t.push_back(gguf_tensor(at + "attn_q.weight", b.attention.wq, read));
    t.push_back(gguf_tensor(at + "attn_k.weight", b.attention.wk, read));
    t.push_back(gguf_tensor(at + "attn_v.weight", b.attention.wv, read));
    t.push_back(gguf_tensor(at + "attn_output.weight", b.attention.wo, read));
    t.push_back(gguf_tensor(at + "ffn_norm.weight", b.ffn_norm.w, read));
    t.push_back(gguf_tensor(at + "ffn_gate.weight", b.feed_forward.w1, read));
    t.push_back(gguf_tensor(at + "ffn_down.weight", b.feed_forward.w2, read));
    t.push_back(gguf_tensor(at + "ffn_up.weight", b.feed_forward.w3, read));
  }
  t.push_back(gguf_tensor("output_norm.weight", m.norm.w, read));
  if (!c.tie_embeddings) t.push_back(gguf_tensor("output.weight", m.output[0].w, read));
  if (c.rope_scaling.type == RopeScaling::Type::Llama3) {
    const std::vector<float> factors = llama3_rope_factors(c);
    t.push_back(
        {"rope_freqs.weight", {static_cast<std::int64_t>(factors.size())}, GgmlType::F32, [factors](float* out) {
           std::copy(factors.begin(), factors.end(), out);
         }});
  }
  return p;
}

}  // namespace llmcc::models
