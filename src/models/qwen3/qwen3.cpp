// Qwen3's parameter shapes and initialisation (the forward is in qwen3.h).
#include "models/qwen3/qwen3.h"

#include <cmath>
#include <string>

#include "llmcc/error.h"
#include "llmcc/train/rng.h"
#include "qwen3.grad.h"  // the generated parameter list

namespace llmcc::models {

Qwen3::Qwen3(const Qwen3Config& config) : cfg(config) {
  cfg.validate();
  const std::int64_t C = cfg.n_embd, V = cfg.vocab_size, F = cfg.hidden_dim, D = cfg.head_dim;
  const std::int64_t Q = cfg.n_head * D, KV = cfg.n_kv_head * D;
  model.embed_tokens = Tensor(nullptr, Shape{V, C});
  model.layers.resize(static_cast<std::size_t>(cfg.n_layer));
  for (Qwen3Block& b : model.layers) {
    b.input_layernorm = Qwen3RmsNorm{cfg.norm_eps, Tensor(nullptr, Shape{C})};
    Qwen3Attention& a = b.self_attn;
    a.n_head = cfg.n_head;
    a.n_kv_head = cfg.n_kv_head;
    a.head_dim = cfg.head_dim;
    a.rope_freqs = RopeConfig{cfg.rope_theta, RopeScaling{}};
    a.q_proj = Tensor(nullptr, Shape{Q, C});
    a.k_proj = Tensor(nullptr, Shape{KV, C});
    a.v_proj = Tensor(nullptr, Shape{KV, C});
    a.o_proj = Tensor(nullptr, Shape{C, Q});
    a.q_norm = Qwen3RmsNorm{cfg.norm_eps, Tensor(nullptr, Shape{D})};
    a.k_norm = Qwen3RmsNorm{cfg.norm_eps, Tensor(nullptr, Shape{D})};
    b.post_attention_layernorm = Qwen3RmsNorm{cfg.norm_eps, Tensor(nullptr, Shape{C})};
    b.mlp.gate_proj = Tensor(nullptr, Shape{F, C});
    b.mlp.up_proj = Tensor(nullptr, Shape{F, C});
    b.mlp.down_proj = Tensor(nullptr, Shape{C, F});
  }
  model.norm = Qwen3RmsNorm{cfg.norm_eps, Tensor(nullptr, Shape{C})};
  if (!cfg.tie_embeddings) lm_head.push_back(Qwen3LmHead{Tensor(nullptr, Shape{V, C})});
  no_adapters.layers.resize(static_cast<std::size_t>(cfg.n_layer));
}

const std::vector<std::string>& qwen3_lora_targets() {
  static const std::vector<std::string> names = {"q", "k", "v", "o", "gate", "up", "down"};
  return names;
}

Qwen3Lora qwen3_lora(const Qwen3& base, const LoraConfig& cfg) {
  lora_check(cfg, qwen3_lora_targets());
  const Qwen3Config& c = base.cfg;
  const std::int64_t C = c.n_embd, F = c.hidden_dim, Q = std::int64_t{c.n_head} * c.head_dim,
                     KV = std::int64_t{c.n_kv_head} * c.head_dim;
  Qwen3Lora lora;
  lora.layers.resize(static_cast<std::size_t>(c.n_layer));
  for (Qwen3BlockLora& b : lora.layers) {
    const auto add = [&](std::vector<Qwen3LoraAdapter>& slot, const char* name, std::int64_t in, std::int64_t out) {
      if (cfg.targets_map(name)) slot.push_back(lora_adapter<Qwen3LoraAdapter>(cfg, in, out));
    };
    add(b.q_proj, "q", C, Q);
    add(b.k_proj, "k", C, KV);
    add(b.v_proj, "v", C, KV);
    add(b.o_proj, "o", Q, C);
    add(b.gate_proj, "gate", C, F);
    add(b.up_proj, "up", C, F);
    add(b.down_proj, "down", F, C);
  }
  return lora;
}

std::vector<Qwen3LoraAdapter*> qwen3_lora_adapters(Qwen3Lora& lora) {
  std::vector<Qwen3LoraAdapter*> out;
  for (Qwen3BlockLora& b : lora.layers)
    for (std::vector<Qwen3LoraAdapter>* slot :
         {&b.q_proj, &b.k_proj, &b.v_proj, &b.o_proj, &b.gate_proj, &b.up_proj, &b.down_proj})
      for (Qwen3LoraAdapter& a : *slot) out.push_back(&a);
  return out;
}

void qwen3_lora_init(Qwen3Lora& lora, std::uint64_t seed) {
  Rng rng(seed);
  for (Qwen3LoraAdapter* a : qwen3_lora_adapters(lora)) lora_init(a->a, a->b, rng);
}

void qwen3_lora_merge(Qwen3& base, const Qwen3Lora& lora) {
  if (lora.layers.size() != base.model.layers.size())
    fail("qwen3_lora_merge", "adapters for " + std::to_string(lora.layers.size()) + " layers, the model has " +
                                 std::to_string(base.model.layers.size()));
  for (std::size_t l = 0; l < lora.layers.size(); ++l) {
    const Qwen3BlockLora& a = lora.layers[l];
    Qwen3Block& b = base.model.layers[l];
    const std::pair<const std::vector<Qwen3LoraAdapter>*, Tensor*> maps[] = {
        {&a.q_proj, &b.self_attn.q_proj}, {&a.k_proj, &b.self_attn.k_proj}, {&a.v_proj, &b.self_attn.v_proj},
        {&a.o_proj, &b.self_attn.o_proj}, {&a.gate_proj, &b.mlp.gate_proj}, {&a.up_proj, &b.mlp.up_proj},
        {&a.down_proj, &b.mlp.down_proj}};
    for (const auto& [slot, w] : maps)
      for (const Qwen3LoraAdapter& adapter : *slot) lora_merge(*w, adapter.a, adapter.b, adapter.scale);
  }
}

void qwen3_init(Qwen3& model, std::uint64_t seed) {
  Rng rng(seed);
  const float std_default = 0.02f;
  const float std_residual = 0.02f / std::sqrt(2.0f * static_cast<float>(model.cfg.n_layer));
  const auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  llmcc::for_each_parameter(model, [&](const std::string& name, Tensor& t) {
    LLMCC_ASSERT(t.defined(), "qwen3_init: bind the parameters first (llmcc::bind_parameters)");
    float* p = t.f32();
    const std::size_t n = static_cast<std::size_t>(t.numel());
    if (t.ndim() == 1) {  // RMSNorm gains
      for (std::size_t i = 0; i < n; ++i) p[i] = 1.0f;
      return;
    }
    const bool residual = ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight");
    rng.fill_normal(p, n, 0.0f, residual ? std_residual : std_default);
  });
}

}  // namespace llmcc::models
