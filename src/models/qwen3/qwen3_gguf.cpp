#include "models/qwen3/qwen3_gguf.h"

#include <string>
#include <string_view>

#include "llmcc/error.h"
#include "llmcc/parameters.h"
#include "models/hf_files.h"
#include "qwen3.grad.h"  // the generated parameter list

namespace llmcc::models {

namespace {

struct Rename {
  std::string_view hf, gguf;
  int rotary;  // 0: as it is; 1: q's heads; 2: k's heads; 3: one head (the q and k norm gains)
};
// Within a block: transformers' name after "model.layers.<i>." -> llama.cpp's after "blk.<i>.".
constexpr Rename kBlock[] = {
    {"input_layernorm.weight", "attn_norm.weight", 0},    {"self_attn.q_proj.weight", "attn_q.weight", 1},
    {"self_attn.k_proj.weight", "attn_k.weight", 2},      {"self_attn.v_proj.weight", "attn_v.weight", 0},
    {"self_attn.o_proj.weight", "attn_output.weight", 0}, {"self_attn.q_norm.weight", "attn_q_norm.weight", 3},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", 3}, {"post_attention_layernorm.weight", "ffn_norm.weight", 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", 0},       {"mlp.up_proj.weight", "ffn_up.weight", 0},
    {"mlp.down_proj.weight", "ffn_down.weight", 0},
};

}  // namespace

GgufModelParts qwen3_gguf_parts(const Qwen3& model_in, const TensorReader& read) {
  Qwen3& m = const_cast<Qwen3&>(model_in);  // for_each_parameter hands Tensor&; nothing is written
  const Qwen3Config& c = m.cfg;
  GgufModelParts p =
      gguf_model_parts("qwen3", {c.max_seq_len, c.n_embd, c.n_layer, c.hidden_dim, c.n_head, c.vocab_size});
  p.set("attention.head_count_kv", static_cast<std::uint32_t>(c.n_kv_head));
  p.set("attention.key_length", static_cast<std::uint32_t>(c.head_dim));
  p.set("attention.value_length", static_cast<std::uint32_t>(c.head_dim));
  p.set("attention.layer_norm_rms_epsilon", c.norm_eps);
  p.set("rope.freq_base", c.rope_theta);

  const int D = c.head_dim;
  llmcc::for_each_parameter(m, [&](const std::string& name, Tensor& t) {
    if (name == "model.embed_tokens.weight") {
      p.tensors.push_back(gguf_tensor("token_embd.weight", t, read));
      return;
    }
    if (name == "model.norm.weight") {
      p.tensors.push_back(gguf_tensor("output_norm.weight", t, read));
      return;
    }
    if (name == "lm_head.0.weight") {
      p.tensors.push_back(gguf_tensor("output.weight", t, read));
      return;
    }
    const std::string prefix = "model.layers.";
    if (name.rfind(prefix, 0) == 0) {
      const std::size_t dot = name.find('.', prefix.size());
      const std::string layer = name.substr(prefix.size(), dot - prefix.size());
      const std::string_view rest = std::string_view(name).substr(dot + 1);
      for (const Rename& r : kBlock) {
        if (rest != r.hf) continue;
        GgufTensor g = gguf_tensor("blk." + layer + "." + std::string(r.gguf), t, read);
        if (r.rotary != 0) {
          const int heads = r.rotary == 1 ? c.n_head : r.rotary == 2 ? c.n_kv_head : 1;
          const std::int64_t cols = t.shape().ndim() == 2 ? t.shape()[1] : 1;
          const Tensor* declared = &t;
          g.fill = [declared, read, heads, D, cols](float* out) {
            std::vector<float> ours(static_cast<std::size_t>(declared->numel()));
            read(*declared, ours.data());
            hf_permute_rotary(ours.data(), heads, D, cols, /*to_hf=*/true, out);
          };
        }
        p.tensors.push_back(std::move(g));
        return;
      }
    }
    fail("qwen3", "parameter " + name + " has no name in llama.cpp's qwen3 architecture");
  });
  return p;
}

}  // namespace llmcc::models
