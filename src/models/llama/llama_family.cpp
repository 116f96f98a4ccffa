#include "models/llama/llama_family.h"

#include <string>
#include <vector>

#include "llama.grad.h"
#include "llmcc/error.h"
#include "models/family_model.h"
#include "models/llama/llama_generate.h"
#include "models/llama/llama_hf.h"
#include "models/llama/llama_weights.h"

namespace llmcc::models {
namespace {

// The fields users set by name (the command line's --n-layer, ...).
struct IntField {
  const char* name;
  int LlamaConfig::* member;
};
constexpr IntField kIntFields[] = {
    {"n_layer", &LlamaConfig::n_layer},       {"n_head", &LlamaConfig::n_head},
    {"n_kv_head", &LlamaConfig::n_kv_head},   {"n_embd", &LlamaConfig::n_embd},
    {"hidden_dim", &LlamaConfig::hidden_dim}, {"max_seq_len", &LlamaConfig::max_seq_len},
    {"vocab_size", &LlamaConfig::vocab_size},
};
struct FloatField {
  const char* name;
  float LlamaConfig::* member;
};
constexpr FloatField kFloatFields[] = {
    {"rope_theta", &LlamaConfig::rope_theta},
    {"norm_eps", &LlamaConfig::norm_eps},
};

class LlamaFamilyConfig final : public FamilyConfigOf<LlamaConfig> {
 public:
  using FamilyConfigOf::FamilyConfigOf;
  const Family& family() const override { return llama_family(); }
  std::unique_ptr<FamilyConfig> clone() const override { return std::make_unique<LlamaFamilyConfig>(value); }
  int vocab_size() const override { return value.vocab_size; }
  int max_seq_len() const override { return value.max_seq_len; }
  std::int64_t parameter_count() const override { return value.parameter_count(); }
  double flops_per_step(int B, int T) const override { return value.flops_per_step(B, T); }
  std::string str() const override { return value.str(); }
  void validate() const override { value.validate(); }
  void to_kv(KeyValues& kv) const override { llama_config_to_kv(value, kv); }
  std::optional<double> get(std::string_view key) const override {
    for (const IntField& f : kIntFields)
      if (key == f.name) return value.*f.member;
    for (const FloatField& f : kFloatFields)
      if (key == f.name) return value.*f.member;
    return std::nullopt;
  }
  void set(std::string_view key, double v) override {
    for (const IntField& f : kIntFields)
      if (key == f.name) value.*f.member = static_cast<int>(v);
    for (const FloatField& f : kFloatFields)
      if (key == f.name) value.*f.member = static_cast<float>(v);
  }
};

ModelConfig config_of(const LlamaConfig& c) { return ModelConfig(std::make_unique<LlamaFamilyConfig>(c)); }

struct LlamaTraits {
  using Entry = llama_loss_Entry;
  using Weights = LlamaWeights;
  static ModelConfig config(const LlamaConfig& c) { return config_of(c); }
  static void init(Weights& w, std::uint64_t seed) { llama_init(w.model, seed); }
  static std::unique_ptr<Generator> generator(const Llama& m, ContextFull when_full) {
    return std::make_unique<LlamaGenerator>(m, when_full);
  }
  static void save_as(const Llama& m, const std::string& format, const std::string& path) {
    if (format != "safetensors") fail("llama", "no export format '" + format + "' (expected safetensors)");
    save_llama_hf(m, path);
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
    static const std::vector<ConfigKey> keys = {
        {"n_layer", "transformer blocks"},
        {"n_head", "attention (query) heads; must divide --n-embd"},
        {"n_kv_head", "key/value heads, must divide --n-head"},
        {"n_embd", "channels"},
        {"hidden_dim", "SwiGLU hidden width"},
        {"max_seq_len", "positions the model can see"},
        {"vocab_size", "token ids the model predicts and reads"},
        {"rope_theta", "RoPE base (10000 or 500000 in the presets)", true},
        {"norm_eps", "RMSNorm epsilon (1e-5 in the presets)", true},
    };
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
  std::vector<ExportFormat> export_formats() const override {
    return {{"safetensors", "a Hugging Face directory (model.safetensors + config.json), fp32"}};
  }
};

}  // namespace

const Family& llama_family() {
  static const LlamaFamily family;
  return family;
}

}  // namespace llmcc::models
