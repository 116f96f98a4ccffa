#include "models/gpt2/gpt2_gguf.h"

#include <string>

namespace llmcc::models {

GgufModelParts gpt2_gguf_parts(const Gpt2& m, const TensorReader& read) {
  const Gpt2Config& c = m.cfg;
  GgufModelParts p =
      gguf_model_parts("gpt2", {c.max_seq_len, c.n_embd, c.n_layer, 4 * c.n_embd, c.n_head, c.vocab_size});
  p.set("attention.layer_norm_epsilon", 1e-5f);  // llmcc's layernorm and GPT-2's

  auto& t = p.tensors;
  t.push_back(gguf_tensor("token_embd.weight", m.wte, read, c.vocab_size));
  t.push_back(gguf_tensor("position_embd.weight", m.wpe, read));
  const auto linear = [&](const std::string& at, const Gpt2Linear& l) {
    t.push_back(gguf_tensor(at + ".weight", l.w, read));
    t.push_back(gguf_tensor(at + ".bias", l.b, read));
  };
  const auto norm = [&](const std::string& at, const Gpt2LayerNorm& n) {
    t.push_back(gguf_tensor(at + ".weight", n.w, read));
    t.push_back(gguf_tensor(at + ".bias", n.b, read));
  };
  for (int l = 0; l < c.n_layer; ++l) {
    const Gpt2Block& b = m.h[static_cast<std::size_t>(l)];
    const std::string at = "blk." + std::to_string(l) + ".";
    norm(at + "attn_norm", b.ln_1);
    linear(at + "attn_qkv", b.attn.c_attn);
    linear(at + "attn_output", b.attn.c_proj);
    norm(at + "ffn_norm", b.ln_2);
    linear(at + "ffn_up", b.mlp.c_fc);
    linear(at + "ffn_down", b.mlp.c_proj);
  }
  norm("output_norm", m.ln_f);  // no output.weight: llama.cpp's GPT-2 takes the head from token_embd
  return p;
}

}  // namespace llmcc::models
