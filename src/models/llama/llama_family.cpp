#include "models/llama/llama_gguf.h"
#include "models/llama/llama_family.h"

#include <string>
#include <vector>

#include "llama.grad.h"
#include "llmcc/error.h"
#include "models/family_model.h"
#include "models/lora_model.h"
#include "models/llama/llama_generate.h"
#include "models/llama/llama_hf.h"
#include "models/llama/llama_weights.h"

namespace llmcc::models {
namespace {

// The fields users set by name (the command line's --n-layer, ...).
constexpr ConfigField<LlamaConfig> kFields[] = {
    {"n_layer", "transformer blocks", &LlamaConfig::n_layer},
    {"n_head", "attention (query) heads; must divide --n-embd", &LlamaConfig::n_head},
    {"n_kv_head", "key/value heads, must divide --n-head", &LlamaConfig::n_kv_head},
    {"n_embd", "channels", &LlamaConfig::n_embd},
    {"hidden_dim", "SwiGLU hidden width", &LlamaConfig::hidden_dim},
    {"max_seq_len", "positions the model can see", &LlamaConfig::max_seq_len},
    {"vocab_size", "token ids the model predicts and reads", &LlamaConfig::vocab_size},
    {"rope_theta", "RoPE base (10000 or 500000 in the presets)", &LlamaConfig::rope_theta},
    {"norm_eps", "RMSNorm epsilon (1e-5 in the presets)", &LlamaConfig::norm_eps},
};

class LlamaFamilyConfig final : public FamilyConfigOf<LlamaConfig> {
 public:
  using FamilyConfigOf::FamilyConfigOf;
  const Family& family() const override { return llama_family(); }
  std::unique_ptr<FamilyConfig> clone() const override { return std::make_unique<LlamaFamilyConfig>(value); }
  void to_kv(KeyValues& kv) const override { llama_config_to_kv(value, kv); }

 private:
  std::span<const ConfigField<LlamaConfig>> fields() const override { return kFields; }
};

ModelConfig config_of(const LlamaConfig& c) { return ModelConfig(std::make_unique<LlamaFamilyConfig>(c)); }

struct LlamaTraits {
  using Entry = llama_loss_Entry;
  using Weights = LlamaWeights;
  using Lora = LlamaLora;
  using LoraEntry = llama_lora_loss_Entry;
  static Weights make(const LlamaConfig& c) { return make_llama(c); }
  static Lora lora(const Llama& base, const LoraConfig& cfg) { return llama_lora(base, cfg); }
  static void lora_init(Lora& lora, std::uint64_t seed) { llama_lora_init(lora, seed); }
  static auto lora_adapters(Lora& lora) { return llama_lora_adapters(lora); }
  static void lora_merge(Llama& base, const Lora& lora) { llama_lora_merge(base, lora); }
  static const PeftModuleNames& peft_modules() { return llama_peft_modules(); }
  static std::vector<PeftSlot> peft_slots(const Llama& base, const Lora& lora) { return llama_peft_slots(base, lora); }
  static ModelConfig config(const LlamaConfig& c) { return config_of(c); }
  static void init(Weights& w, std::uint64_t seed) { llama_init(w.model, seed); }
  static std::unique_ptr<Generator> generator(const Llama& m, ContextFull when_full) {
    return std::make_unique<LlamaGenerator>(m, when_full);
  }
  static GgufModelParts gguf_parts(const Llama& m) { return llama_gguf_parts(m, read_loaded()); }
  static void save_as(const Llama& m, const std::string& format, const std::string& path,
                      const SafetensorsModelOptions& safetensors) {
    if (format != "safetensors") fail("llama", "no export format '" + format + "' (expected safetensors)");
    save_llama_hf(m, path, safetensors);
  }
};

class LlamaFamily final : public Family {
 public:
  const char* name() const override { return "llama"; }
  const char* display_name() const override { return "Llama"; }
  const char* hf_model_type() const override { return "llama"; }
  const char* hf_architecture() const override { return "LlamaForCausalLM"; }
  std::vector<std::string> preset_names() const override { return llama_preset_names(); }
  ModelConfig preset(const std::string& name) const override { return config_of(llama_preset(name)); }
  const std::vector<ConfigKey>& config_keys() const override {
    static const std::vector<ConfigKey> keys = config_keys_of(kFields);
    return keys;
  }
  ModelConfig config_from_kv(const KeyValues& kv, const std::string& where) const override {
    return config_of(llama_config_from_kv(kv, where));
  }
  std::unique_ptr<Model> make(const ModelConfig& config) const override {
    return std::make_unique<FamilyModel<LlamaTraits>>(make_llama(config.as<LlamaConfig>()));
  }
  std::unique_ptr<Model> load(const std::string& path) const override {
    return std::make_unique<FamilyModel<LlamaTraits>>(load_llama(path));
  }
  std::optional<GgufModelParts> hf_gguf_parts(const std::string& path) const override {
    const LlamaHfStream s = open_llama_hf(path);
    return llama_gguf_parts(*s.shapes, s.read);
  }
  std::vector<ExportFormat> export_formats() const override {
    return {{"safetensors", "a Hugging Face directory (model.safetensors + config.json), fp32"}};
  }
  PeftModuleNames lora_hf_modules() const override { return llama_peft_modules(); }
  std::vector<std::string> lora_targets() const override { return llama_lora_targets(); }
  std::unique_ptr<Model> with_lora(std::unique_ptr<Model> base, LoraBase identity,
                                   const LoraConfig& cfg) const override {
    return lora_model_of<LlamaTraits>(std::move(base), std::move(identity), cfg);
  }
};

}  // namespace

const Family& llama_family() {
  static const LlamaFamily family;
  return family;
}

}  // namespace llmcc::models
