#include "models/qwen3/qwen3_gguf.h"
#include "models/qwen3/qwen3_family.h"

#include <string>
#include <vector>

#include "llmcc/error.h"
#include "models/family_model.h"
#include "models/lora_model.h"
#include "models/qwen3/qwen3_generate.h"
#include "models/qwen3/qwen3_hf.h"
#include "models/qwen3/qwen3_weights.h"
#include "qwen3.grad.h"

namespace llmcc::models {
namespace {

// The fields users set by name (the command line's --n-layer, ...).
constexpr ConfigField<Qwen3Config> kFields[] = {
    {"n_layer", "transformer blocks", &Qwen3Config::n_layer},
    {"n_head", "attention (query) heads; must divide --n-embd", &Qwen3Config::n_head},
    {"n_kv_head", "key/value heads, must divide --n-head", &Qwen3Config::n_kv_head},
    {"n_embd", "channels", &Qwen3Config::n_embd},
    {"head_dim", "channels per attention head, independent of --n-embd / --n-head", &Qwen3Config::head_dim},
    {"hidden_dim", "SwiGLU hidden width", &Qwen3Config::hidden_dim},
    {"max_seq_len", "positions the model can see", &Qwen3Config::max_seq_len},
    {"vocab_size", "token ids the model predicts and reads", &Qwen3Config::vocab_size},
    {"rope_theta", "RoPE base", &Qwen3Config::rope_theta},
    {"norm_eps", "RMSNorm epsilon", &Qwen3Config::norm_eps},
};

class Qwen3FamilyConfig final : public FamilyConfigOf<Qwen3Config> {
 public:
  using FamilyConfigOf::FamilyConfigOf;
  const Family& family() const override { return qwen3_family(); }
  std::unique_ptr<FamilyConfig> clone() const override { return std::make_unique<Qwen3FamilyConfig>(value); }
  void to_kv(KeyValues& kv) const override { qwen3_config_to_kv(value, kv); }

 private:
  std::span<const ConfigField<Qwen3Config>> fields() const override { return kFields; }
};

ModelConfig config_of(const Qwen3Config& c) { return ModelConfig(std::make_unique<Qwen3FamilyConfig>(c)); }

struct Qwen3Traits {
  using Entry = qwen3_loss_Entry;
  using Weights = Qwen3Weights;
  using Lora = Qwen3Lora;
  using LoraEntry = qwen3_lora_loss_Entry;
  static Weights make(const Qwen3Config& c) { return make_qwen3(c); }
  static Lora lora(const Qwen3& base, const LoraConfig& cfg) { return qwen3_lora(base, cfg); }
  static void lora_init(Lora& lora, std::uint64_t seed) { qwen3_lora_init(lora, seed); }
  static auto lora_adapters(Lora& lora) { return qwen3_lora_adapters(lora); }
  static void lora_merge(Qwen3& base, const Lora& lora) { qwen3_lora_merge(base, lora); }
  static const PeftModuleNames& peft_modules() { return qwen3_peft_modules(); }
  static std::vector<PeftSlot> peft_slots(const Qwen3& base, const Lora& lora) { return qwen3_peft_slots(base, lora); }
  static ModelConfig config(const Qwen3Config& c) { return config_of(c); }
  static void init(Weights& w, std::uint64_t seed) { qwen3_init(w.model, seed); }
  static std::unique_ptr<Generator> generator(const Qwen3& m, ContextFull when_full) {
    return std::make_unique<Qwen3Generator>(m, when_full);
  }
  static GgufModelParts gguf_parts(const Qwen3& m) { return qwen3_gguf_parts(m, read_loaded()); }
  static void save_as(const Qwen3& m, const std::string& format, const std::string& path,
                      const SafetensorsModelOptions& safetensors) {
    if (format != "safetensors") fail("qwen3", "no export format '" + format + "' (expected safetensors)");
    save_qwen3_hf(m, path, safetensors);
  }
};

class Qwen3Family final : public Family {
 public:
  const char* name() const override { return "qwen3"; }
  const char* display_name() const override { return "Qwen3"; }
  const char* hf_model_type() const override { return "qwen3"; }
  const char* hf_architecture() const override { return "Qwen3ForCausalLM"; }
  std::vector<std::string> preset_names() const override { return qwen3_preset_names(); }
  ModelConfig preset(const std::string& name) const override { return config_of(qwen3_preset(name)); }
  const std::vector<ConfigKey>& config_keys() const override {
    static const std::vector<ConfigKey> keys = config_keys_of(kFields);
    return keys;
  }
  ModelConfig config_from_kv(const KeyValues& kv, const std::string& where) const override {
    return config_of(qwen3_config_from_kv(kv, where));
  }
  std::unique_ptr<Model> make(const ModelConfig& config) const override {
    return std::make_unique<FamilyModel<Qwen3Traits>>(make_qwen3(config.as<Qwen3Config>()));
  }
  std::unique_ptr<Model> load(const std::string& path) const override {
    return std::make_unique<FamilyModel<Qwen3Traits>>(load_qwen3(path));
  }
  std::optional<GgufModelParts> hf_gguf_parts(const std::string& path) const override {
    const Qwen3HfStream s = open_qwen3_hf(path);
    return qwen3_gguf_parts(*s.shapes, s.read);
  }
  std::vector<ExportFormat> export_formats() const override {
    return {{"safetensors", "a Hugging Face directory (model.safetensors + config.json), fp32"}};
  }
  PeftModuleNames lora_hf_modules() const override { return qwen3_peft_modules(); }
  std::vector<std::string> lora_targets() const override { return qwen3_lora_targets(); }
  std::unique_ptr<Model> with_lora(std::unique_ptr<Model> base, LoraBase identity,
                                   const LoraConfig& cfg) const override {
    return lora_model_of<Qwen3Traits>(std::move(base), std::move(identity), cfg);
  }
};

}  // namespace

const Family& qwen3_family() {
  static const Qwen3Family family;
  return family;
}

}  // namespace llmcc::models
