// Llama's parameter shapes and initialisation (the forward is in llama.h).
#include "models/llama/llama.h"

#include <cmath>

#include "llama.grad.h"  // the generated parameter list
#include "llmcc/error.h"
#include "llmcc/train/rng.h"

namespace llmcc::models {

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

Llama::Llama(const LlamaConfig& config) : cfg(config) {
  cfg.validate();
  const std::int64_t C = cfg.n_embd, V = cfg.vocab_size, F = cfg.hidden_dim;
  const std::int64_t HS = cfg.head_dim(), Q = cfg.n_head * HS, KV = cfg.n_kv_head * HS;
  tok_embeddings = Tensor(nullptr, Shape{V, C});
  layers.resize(static_cast<std::size_t>(cfg.n_layer));
  for (LlamaBlock& b : layers) {
    b.attention_norm = LlamaRmsNorm{cfg.norm_eps, Tensor(nullptr, Shape{C})};
    b.attention.n_head = cfg.n_head;
    b.attention.n_kv_head = cfg.n_kv_head;
    b.attention.rope_freqs = cfg.rope();
    b.attention.wq = Tensor(nullptr, Shape{Q, C});
    b.attention.wk = Tensor(nullptr, Shape{KV, C});
    b.attention.wv = Tensor(nullptr, Shape{KV, C});
    b.attention.wo = Tensor(nullptr, Shape{C, Q});
    b.ffn_norm = LlamaRmsNorm{cfg.norm_eps, Tensor(nullptr, Shape{C})};
    b.feed_forward.w1 = Tensor(nullptr, Shape{F, C});
    b.feed_forward.w2 = Tensor(nullptr, Shape{C, F});
    b.feed_forward.w3 = Tensor(nullptr, Shape{F, C});
  }
  norm = LlamaRmsNorm{cfg.norm_eps, Tensor(nullptr, Shape{C})};
  if (!cfg.tie_embeddings) output.push_back(LlamaOutput{Tensor(nullptr, Shape{V, C})});
  no_adapters.layers.resize(static_cast<std::size_t>(cfg.n_layer));
}

const std::vector<std::string>& llama_lora_targets() {
  static const std::vector<std::string> names = {"q", "k", "v", "o", "gate", "up", "down"};
  return names;
}

LlamaLora llama_lora(const Llama& base, const LoraConfig& cfg) {
  lora_check(cfg, llama_lora_targets());
  const LlamaConfig& c = base.cfg;
  const std::int64_t C = c.n_embd, F = c.hidden_dim, HS = c.head_dim(), Q = c.n_head * HS, KV = c.n_kv_head * HS;
  LlamaLora lora;
  lora.layers.resize(static_cast<std::size_t>(c.n_layer));
  for (LlamaBlockLora& b : lora.layers) {
    const auto add = [&](std::vector<LlamaLoraAdapter>& slot, const char* name, std::int64_t in, std::int64_t out) {
      if (cfg.targets_map(name)) slot.push_back(lora_adapter<LlamaLoraAdapter>(cfg, in, out));
    };
    add(b.wq, "q", C, Q);
    add(b.wk, "k", C, KV);
    add(b.wv, "v", C, KV);
    add(b.wo, "o", Q, C);
    add(b.w1, "gate", C, F);
    add(b.w3, "up", C, F);
    add(b.w2, "down", F, C);
  }
  return lora;
}

std::vector<LlamaLoraAdapter*> llama_lora_adapters(LlamaLora& lora) {
  std::vector<LlamaLoraAdapter*> out;
  for (LlamaBlockLora& b : lora.layers)
    for (std::vector<LlamaLoraAdapter>* slot : {&b.wq, &b.wk, &b.wv, &b.wo, &b.w1, &b.w2, &b.w3})
      for (LlamaLoraAdapter& a : *slot) out.push_back(&a);
  return out;
}

void llama_lora_init(LlamaLora& lora, std::uint64_t seed) {
  Rng rng(seed);
  for (LlamaLoraAdapter* a : llama_lora_adapters(lora)) lora_init(a->a, a->b, rng);
}

void llama_lora_merge(Llama& base, const LlamaLora& lora) {
  if (lora.layers.size() != base.layers.size())
    fail("llama_lora_merge", "adapters for " + std::to_string(lora.layers.size()) + " layers, the model has " +
                                 std::to_string(base.layers.size()));
  for (std::size_t l = 0; l < lora.layers.size(); ++l) {
    const LlamaBlockLora& a = lora.layers[l];
    LlamaBlock& b = base.layers[l];
    const std::pair<const std::vector<LlamaLoraAdapter>*, Tensor*> maps[] = {
        {&a.wq, &b.attention.wq},    {&a.wk, &b.attention.wk},    {&a.wv, &b.attention.wv},   {&a.wo, &b.attention.wo},
        {&a.w1, &b.feed_forward.w1}, {&a.w2, &b.feed_forward.w2}, {&a.w3, &b.feed_forward.w3}};
    for (const auto& [slot, w] : maps)
      for (const LlamaLoraAdapter& adapter : *slot) lora_merge(*w, adapter.a, adapter.b, adapter.scale);
  }
}

void llama_init(Llama& model, std::uint64_t seed) {
  Rng rng(seed);
  const float std_default = 0.02f;
  const float std_residual = 0.02f / std::sqrt(2.0f * static_cast<float>(model.cfg.n_layer));
  llmcc::for_each_parameter(model, [&](const std::string& name, Tensor& t) {
    LLMCC_ASSERT(t.defined(), "llama_init: bind the parameters first (llmcc::bind_parameters)");
    float* p = t.f32();
    const std::size_t n = static_cast<std::size_t>(t.numel());
    if (t.ndim() == 1) {  // RMSNorm weights
      for (std::size_t i = 0; i < n; ++i) p[i] = 1.0f;
      return;
    }
    const bool residual = ends_with(name, "attention.wo.weight") || ends_with(name, "feed_forward.w2.weight");
    rng.fill_normal(p, n, 0.0f, residual ? std_residual : std_default);
  });
}

}  // namespace llmcc::models
