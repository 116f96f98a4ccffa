#include "model_family.h"

#include <cstdio>
#include <cstring>

#include "llmcc/adgen.h"
#include "llmcc/error.h"
#include "model_traits.h"
#include "nn/hf_files.h"

namespace llmcc::cli {

// ---- ModelConfig --------------------------------------------------------------------------

ModelConfig ModelConfig::of(const nn::Gpt2Config& c) {
  ModelConfig m;
  m.family = Family::Gpt2;
  m.gpt2 = c;
  return m;
}

ModelConfig ModelConfig::of(const nn::LlamaConfig& c) {
  ModelConfig m;
  m.family = Family::Llama;
  m.llama = c;
  return m;
}

const char* ModelConfig::family_name() const { return family == Family::Llama ? "llama" : "gpt2"; }
const char* ModelConfig::display_name() const { return family == Family::Llama ? "Llama" : "GPT-2"; }
int ModelConfig::vocab_size() const { return family == Family::Llama ? llama.vocab_size : gpt2.vocab_size; }
int ModelConfig::max_seq_len() const {
  return family == Family::Llama ? llama.max_seq_len : gpt2.max_seq_len;
}

std::int64_t ModelConfig::parameter_count() const {
  return family == Family::Llama ? llama.parameter_count() : gpt2.parameter_count();
}

double ModelConfig::flops_per_step(int B, int T) const {
  return family == Family::Llama ? llama.flops_per_step(B, T) : gpt2.flops_per_step(B, T);
}

std::string ModelConfig::str() const { return family == Family::Llama ? llama.str() : gpt2.str(); }

void ModelConfig::validate() const {
  if (family == Family::Llama)
    llama.validate();
  else
    gpt2.validate();
}

void ModelConfig::to_kv(KeyValues& kv) const {
  if (family == Family::Llama)
    nn::llama_config_to_kv(llama, kv);
  else
    nn::gpt2_config_to_kv(gpt2, kv);
}

std::size_t ModelConfig::step_arena_bytes(int B, int T) const {
  const double BT = static_cast<double>(B) * T;
  double activations = 0.0, logits = 0.0;
  if (family == Family::Gpt2) {
    // Floats per micro-batch: each layer keeps about 16 (B, T, C) tensors for its backward (two
    // layernorm outputs, q, k, v, attention output, two projections, two residual sums, the MLP's
    // 4C hidden state before and after GELU) plus per-row statistics; the LM head keeps (B, T, Vp)
    // logits.
    const nn::Gpt2Config& c = gpt2;
    const double C = c.n_embd;
    const double per_layer = 16.0 * BT * C + 4.0 * BT + 2.0 * B * c.n_head * T;
    logits = BT * c.padded_vocab_size;
    activations = c.n_layer * per_layer + 4.0 * BT * C + 2.0 * logits;
  } else {
    // What the step arena holds at its peak, the end of the backward: everything the forward
    // saves (per layer two RMSNorm outputs, two residual sums, the attention and MLP outputs (C
    // wide), q and the attention output (C), q and k before and after RoPE and v (KV wide), the
    // MLP's w1, silu, w3 and product (F wide), per-row statistics), the (B, T, V) logits and
    // their adjoint, and the adjoints passed between layers (each callee's own backward works in
    // adgen's scratch arenas, reported separately). A quarter more for what this count misses.
    const nn::LlamaConfig& c = llama;
    const double C = c.n_embd, F = c.hidden_dim, KV = static_cast<double>(c.n_kv_head) * c.head_dim();
    const double per_layer =
        BT * (6.0 * C + 3.0 * C + 3.0 * KV + 4.0 * F) + 4.0 * BT + 2.0 * B * c.n_head * T;
    const double between_layers = 4.0 * BT * C;
    logits = BT * c.vocab_size;
    const double floats = c.n_layer * (per_layer + between_layers) + 4.0 * BT * C + 2.0 * logits;
    return static_cast<std::size_t>(1.25 * 4.0 * floats) + (std::size_t{64} << 20);
  }
  // Twice the activations covers the backward's adjoints with room to spare; the LM head's
  // backward makes a logits-sized gradient.
  const double bytes = 4.0 * (2.0 * activations + 2.0 * logits);
  return static_cast<std::size_t>(bytes) + (std::size_t{64} << 20);
}

MemoryPlan memory_plan(const ModelConfig& config, int B, int T) {
  MemoryPlan p;
  p.parameters = config.parameter_count();
  p.params_bytes = static_cast<std::size_t>(p.parameters) * sizeof(float);
  p.grads_bytes = p.params_bytes;
  p.optimizer_bytes = 2 * p.params_bytes;
  p.arena_bytes = config.step_arena_bytes(B, T);
  p.B = B;
  p.T = T;
  return p;
}

std::string describe(const MemoryPlan& p) {
  auto gib = [](std::size_t bytes) {
    char buf[32];
    const double g = static_cast<double>(bytes) / double(1 << 30);
    std::snprintf(buf, sizeof buf, g >= 10 ? "%.1f GiB" : (g >= 0.1 ? "%.2f GiB" : "%.3f GiB"), g);
    return std::string(buf);
  };
  char count[32];
  const double n = static_cast<double>(p.parameters);
  if (n >= 1e9)
    std::snprintf(count, sizeof count, "%.2fG", n / 1e9);
  else
    std::snprintf(count, sizeof count, "%.2fM", n / 1e6);
  return std::string(count) + " parameters: weights " + gib(p.params_bytes) + " + gradients " +
         gib(p.grads_bytes) + " + AdamW " + gib(p.optimizer_bytes) +
         " + step arena <= " + gib(p.arena_bytes) + " (B " + std::to_string(p.B) + " x T " +
         std::to_string(p.T) + ") = " + gib(p.total());
}

ModelConfig model_config_from_kv(const KeyValues& kv, const std::string& where) {
  const auto it = kv.find("model.family");
  const std::string family = it == kv.end() ? "gpt2" : it->second;
  if (family == "gpt2") return ModelConfig::of(nn::gpt2_config_from_kv(kv, where));
  if (family == "llama") return ModelConfig::of(nn::llama_config_from_kv(kv, where));
  fail("model", where + ": model.family = '" + family + "' is not a model family llmcc knows (gpt2, llama)");
}

ModelConfig model_preset(const std::string& name) {
  if (nn::is_llama_preset(name)) return ModelConfig::of(nn::llama_preset(name));
  for (const std::string& n : nn::gpt2_preset_names())
    if (n == name) return ModelConfig::of(nn::gpt2_preset(name));
  std::string names;
  for (const std::string& n : model_preset_names()) names += (names.empty() ? "" : ", ") + n;
  fail("model", "unknown preset '" + name + "' (expected one of: " + names + ")");
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> out = nn::gpt2_preset_names();
  for (const std::string& n : nn::llama_preset_names()) out.push_back(n);
  return out;
}

// ---- the families behind Model -------------------------------------------------------------

namespace {

// One family (model_traits.h: Gpt2Family, LlamaFamily) as a Model.
template <class Traits>
class FamilyModel final : public Model {
 public:
  explicit FamilyModel(typename Traits::Weights w) : w_(std::move(w)), config_(ModelConfig::of(w_.model.cfg)) {}

  const ModelConfig& config() const override { return config_; }
  ParameterStore& params() override { return w_.params; }
  ParameterStore& grads() override {
    if (!g_) g_ = std::make_unique<adgen::GradBuffer<typename Traits::Grad>>(adgen::make_grad(w_.model));
    return g_->store;
  }
  void init(std::uint64_t seed) override { Traits::init(w_, seed); }
  float loss_and_grad(const Tokens& x, const Tokens& y, float d_loss) override {
    grads();
    const float loss = Traits::fwd(w_, x, y, saved_);
    Traits::bwd(w_, x, y, saved_, d_loss, &g_->grad);
    return loss;
  }
  float loss(const Tokens& x, const Tokens& y) const override { return Traits::loss(w_, x, y); }
  std::vector<std::int32_t> sample(const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                   const nn::SamplingConfig& cfg, Rng& rng,
                                   const std::function<void(std::int32_t)>& on_token) const override {
    return Traits::sample(w_, prompt, max_new_tokens, cfg, rng, on_token);
  }

 private:
  typename Traits::Weights w_;
  ModelConfig config_;
  std::unique_ptr<adgen::GradBuffer<typename Traits::Grad>> g_;
  typename Traits::Saved saved_;  // kept across steps: a warm step allocates no records
};

}  // namespace

std::unique_ptr<Model> make_model(const ModelConfig& config) {
  config.validate();
  if (config.family == Family::Llama)
    return std::make_unique<FamilyModel<LlamaFamily>>(LlamaFamily::make(config.llama));
  return std::make_unique<FamilyModel<Gpt2Family>>(Gpt2Family::make(config.gpt2));
}

Family checkpoint_family(const std::string& path) {
  // A Hugging Face model (directory or .safetensors with config.json) says its family itself.
  if (nn::is_hf_model(path)) return nn::hf_model_type(path) == "llama" ? Family::Llama : Family::Gpt2;
  char head[8] = {};
  std::size_t got = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    got = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
  }
  if (got == sizeof head && std::memcmp(head, "LLMCCKPT", 8) == 0) {
    CheckpointReader reader(path);
    if (reader.has("config")) {
      const KeyValues kv = parse_key_values(reader.blob("config"), path + " [config]");
      if (const auto it = kv.find("model.family"); it != kv.end() && it->second == "llama")
        return Family::Llama;
    }
  }
  return Family::Gpt2;
}

std::unique_ptr<Model> load_model(const std::string& path) {
  // Anything but a Llama checkpoint (a GPT-2 one, an llm.c file, a file that is not a checkpoint)
  // goes to load_gpt2, which tells them apart and names what is wrong.
  if (checkpoint_family(path) == Family::Llama)
    return std::make_unique<FamilyModel<LlamaFamily>>(nn::load_llama(path));
  return std::make_unique<FamilyModel<Gpt2Family>>(nn::load_gpt2(path));
}

}  // namespace llmcc::cli
