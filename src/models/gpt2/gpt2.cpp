// GPT-2's parameter shapes and initialisation (the forward is in gpt2.h).
#include "models/gpt2/gpt2.h"

#include <cmath>
#include <cstring>

#include "gpt2.grad.h"  // the generated parameter list
#include "llmcc/error.h"
#include "llmcc/train/rng.h"

namespace llmcc::models {

namespace {
Gpt2Linear linear_shape(std::int64_t out, std::int64_t in) {
  Gpt2Linear l;
  l.w = Tensor(nullptr, Shape{out, in});
  l.b = Tensor(nullptr, Shape{out});
  return l;
}
Gpt2LayerNorm layernorm_shape(std::int64_t C) {
  return Gpt2LayerNorm{Tensor(nullptr, Shape{C}), Tensor(nullptr, Shape{C})};
}
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

Gpt2::Gpt2(const Gpt2Config& config) : cfg(config) {
  cfg.validate();
  const std::int64_t C = cfg.n_embd;
  wte = Tensor(nullptr, Shape{cfg.padded_vocab_size, C});
  wpe = Tensor(nullptr, Shape{cfg.max_seq_len, C});
  h.resize(static_cast<std::size_t>(cfg.n_layer));
  for (Gpt2Block& b : h) {
    b.ln_1 = layernorm_shape(C);
    b.attn.n_head = cfg.n_head;
    b.attn.c_attn = linear_shape(3 * C, C);
    b.attn.c_proj = linear_shape(C, C);
    b.ln_2 = layernorm_shape(C);
    b.mlp.c_fc = linear_shape(4 * C, C);
    b.mlp.c_proj = linear_shape(C, 4 * C);
  }
  ln_f = layernorm_shape(C);
  no_adapters.h.resize(static_cast<std::size_t>(cfg.n_layer));
}

const std::vector<std::string>& gpt2_lora_targets() {
  static const std::vector<std::string> names = {"c_attn", "c_proj", "c_fc"};
  return names;
}

Gpt2Lora gpt2_lora(const Gpt2& base, const LoraConfig& cfg) {
  lora_check(cfg, gpt2_lora_targets());
  const std::int64_t C = base.cfg.n_embd;
  Gpt2Lora lora;
  lora.h.resize(static_cast<std::size_t>(base.cfg.n_layer));
  for (Gpt2BlockLora& b : lora.h) {
    const auto add = [&](std::vector<Gpt2LoraAdapter>& slot, const char* name, std::int64_t in, std::int64_t out) {
      if (cfg.targets_map(name)) slot.push_back(lora_adapter<Gpt2LoraAdapter>(cfg, in, out));
    };
    add(b.attn.c_attn, "c_attn", C, 3 * C);
    add(b.attn.c_proj, "c_proj", C, C);
    add(b.mlp.c_fc, "c_fc", C, 4 * C);
    add(b.mlp.c_proj, "c_proj", 4 * C, C);
  }
  return lora;
}

std::vector<Gpt2LoraAdapter*> gpt2_lora_adapters(Gpt2Lora& lora) {
  std::vector<Gpt2LoraAdapter*> out;
  for (Gpt2BlockLora& b : lora.h)
    for (std::vector<Gpt2LoraAdapter>* slot : {&b.attn.c_attn, &b.attn.c_proj, &b.mlp.c_fc, &b.mlp.c_proj})
      for (Gpt2LoraAdapter& a : *slot) out.push_back(&a);
  return out;
}

void gpt2_lora_init(Gpt2Lora& lora, std::uint64_t seed) {
  Rng rng(seed);
  for (Gpt2LoraAdapter* a : gpt2_lora_adapters(lora)) lora_init(a->a, a->b, rng);
}

void gpt2_lora_merge(Gpt2& base, const Gpt2Lora& lora) {
  if (lora.h.size() != base.h.size())
    fail("gpt2_lora_merge",
         "adapters for " + std::to_string(lora.h.size()) + " layers, the model has " + std::to_string(base.h.size()));
  for (std::size_t l = 0; l < lora.h.size(); ++l) {
    const Gpt2BlockLora& a = lora.h[l];
    Gpt2Block& b = base.h[l];
    const std::pair<const std::vector<Gpt2LoraAdapter>*, Tensor*> maps[] = {{&a.attn.c_attn, &b.attn.c_attn.w},
                                                                            {&a.attn.c_proj, &b.attn.c_proj.w},
                                                                            {&a.mlp.c_fc, &b.mlp.c_fc.w},
                                                                            {&a.mlp.c_proj, &b.mlp.c_proj.w}};
    for (const auto& [slot, w] : maps)
      for (const Gpt2LoraAdapter& adapter : *slot) lora_merge(*w, adapter.a, adapter.b, adapter.scale);
  }
}

void gpt2_init(Gpt2& model, std::uint64_t seed) {
  Rng rng(seed);
  const float std_default = 0.02f;
  const float std_residual = 0.02f / std::sqrt(2.0f * static_cast<float>(model.cfg.n_layer));
  llmcc::for_each_parameter(model, [&](const std::string& name, Tensor& t) {
    LLMCC_ASSERT(t.defined(), "gpt2_init: bind the parameters first (llmcc::bind_parameters)");
    float* p = t.f32();
    const std::size_t n = static_cast<std::size_t>(t.numel());
    if (t.ndim() == 1) {
      const float value =
          ends_with(name, "ln_1.weight") || ends_with(name, "ln_2.weight") || name == "ln_f.weight" ? 1.0f : 0.0f;
      for (std::size_t i = 0; i < n; ++i) p[i] = value;
      return;
    }
    const bool residual = ends_with(name, "attn.c_proj.weight") || ends_with(name, "mlp.c_proj.weight");
    if (name == "wte") {
      // Only the real vocabulary rows; the padding stays zero.
      const std::size_t real = static_cast<std::size_t>(model.cfg.vocab_size) * static_cast<std::size_t>(t.dim(1));
      rng.fill_normal(p, real, 0.0f, std_default);
      std::memset(p + real, 0, (n - real) * sizeof(float));
      return;
    }
    rng.fill_normal(p, n, 0.0f, residual ? std_residual : std_default);
  });
}

}  // namespace llmcc::models
