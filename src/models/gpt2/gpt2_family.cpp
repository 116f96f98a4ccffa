#include "models/gpt2/gpt2_gguf.h"
#include "models/gpt2/gpt2_family.h"

#include <cmath>
#include <string>
#include <vector>

#include "gpt2.grad.h"
#include "llmcc/error.h"
#include "models/family_model.h"
#include "models/lora_model.h"
#include "models/gpt2/gpt2_generate.h"
#include "models/gpt2/gpt2_hf.h"
#include "models/gpt2/gpt2_llmc.h"
#include "models/gpt2/gpt2_weights.h"

namespace llmcc::models {
namespace {

// The fields users set by name (the command line's --n-layer, ...).
constexpr ConfigField<Gpt2Config> kFields[] = {
    {"n_layer", "transformer blocks", &Gpt2Config::n_layer},
    {"n_head", "attention (query) heads; must divide --n-embd", &Gpt2Config::n_head},
    {"n_embd", "channels", &Gpt2Config::n_embd},
    {"max_seq_len", "positions the model can see", &Gpt2Config::max_seq_len},
    {"vocab_size", "token ids the model predicts and reads (GPT-2 pads its embedding to a multiple of 128)",
     &Gpt2Config::vocab_size},
};

class Gpt2FamilyConfig final : public FamilyConfigOf<Gpt2Config> {
 public:
  using FamilyConfigOf::FamilyConfigOf;
  const Family& family() const override { return gpt2_family(); }
  std::unique_ptr<FamilyConfig> clone() const override { return std::make_unique<Gpt2FamilyConfig>(value); }
  void to_kv(KeyValues& kv) const override { gpt2_config_to_kv(value, kv); }
  void set(std::string_view key, double v) override {
    FamilyConfigOf::set(key, v);
    // The embedding's rows: the vocabulary rounded up to llm.c's multiple of 128.
    if (key == "vocab_size") value.padded_vocab_size = padded_vocab(value.vocab_size);
  }

 private:
  std::span<const ConfigField<Gpt2Config>> fields() const override { return kFields; }
};

ModelConfig config_of(const Gpt2Config& c) { return ModelConfig(std::make_unique<Gpt2FamilyConfig>(c)); }

struct Gpt2Traits {
  using Entry = gpt2_loss_Entry;
  using Weights = Gpt2Weights;
  using Lora = Gpt2Lora;
  using LoraEntry = gpt2_lora_loss_Entry;
  static Weights make(const Gpt2Config& c) { return make_gpt2(c); }
  static Lora lora(const Gpt2& base, const LoraConfig& cfg) { return gpt2_lora(base, cfg); }
  static void lora_init(Lora& lora, std::uint64_t seed) { gpt2_lora_init(lora, seed); }
  static auto lora_adapters(Lora& lora) { return gpt2_lora_adapters(lora); }
  static void lora_merge(Gpt2& base, const Lora& lora) { gpt2_lora_merge(base, lora); }
  static const PeftModuleNames& peft_modules() { return gpt2_peft_modules(); }
  static std::vector<PeftSlot> peft_slots(const Gpt2& base, const Lora& lora) { return gpt2_peft_slots(base, lora); }
  static ModelConfig config(const Gpt2Config& c) { return config_of(c); }
  static void init(Weights& w, std::uint64_t seed) { gpt2_init(w.model, seed); }
  static std::unique_ptr<Generator> generator(const Gpt2& m, ContextFull when_full) {
    return std::make_unique<Gpt2Generator>(m, when_full);
  }
  static GgufModelParts gguf_parts(const Gpt2& m) { return gpt2_gguf_parts(m, read_loaded()); }
  static void save_as(const Gpt2& m, const std::string& format, const std::string& path,
                      const SafetensorsModelOptions& safetensors) {
    if (format == "safetensors")
      save_gpt2_hf(m, path, safetensors);
    else if (format == "llmc" || format == "llmc-bf16")
      save_gpt2_llmc(m, path, format == "llmc" ? LlmcDType::F32 : LlmcDType::BF16);
    else
      fail("gpt2", "no export format '" + format + "' (expected llmc, llmc-bf16 or safetensors)");
  }
};

class Gpt2Family final : public Family {
 public:
  const char* name() const override { return "gpt2"; }
  const char* display_name() const override { return "GPT-2"; }
  const char* hf_model_type() const override { return "gpt2"; }
  const char* hf_architecture() const override { return "GPT2LMHeadModel"; }
  std::vector<std::string> preset_names() const override { return gpt2_preset_names(); }
  ModelConfig preset(const std::string& name) const override { return config_of(gpt2_preset(name)); }
  const std::vector<ConfigKey>& config_keys() const override {
    static const std::vector<ConfigKey> keys = config_keys_of(kFields);
    return keys;
  }
  ModelConfig config_from_kv(const KeyValues& kv, const std::string& where) const override {
    return config_of(gpt2_config_from_kv(kv, where));
  }
  std::unique_ptr<Model> make(const ModelConfig& config) const override {
    return std::make_unique<FamilyModel<Gpt2Traits>>(make_gpt2(config.as<Gpt2Config>()));
  }
  std::unique_ptr<Model> load(const std::string& path) const override {
    return std::make_unique<FamilyModel<Gpt2Traits>>(load_gpt2(path));
  }
  bool owns_file(const std::string& path) const override { return is_llmc_model_file(path); }
  std::string own_files_help() const override { return "an llm.c GPT-2 model file (gpt2_124M.bin, fp32 or bf16)"; }
  std::vector<ExportFormat> export_formats() const override {
    return {{"llmc", "llm.c's GPT-2 model file, fp32 (version 3)"},
            {"llmc-bf16", "llm.c's GPT-2 model file, bf16 (version 5)"},
            {"safetensors", "a Hugging Face directory (model.safetensors + config.json), fp32"}};
  }
  PeftModuleNames lora_hf_modules() const override { return gpt2_peft_modules(); }
  bool lora_hf_conv1d() const override { return true; }
  std::vector<std::string> lora_targets() const override { return gpt2_lora_targets(); }
  std::unique_ptr<Model> with_lora(std::unique_ptr<Model> base, LoraBase identity,
                                   const LoraConfig& cfg) const override {
    return lora_model_of<Gpt2Traits>(std::move(base), std::move(identity), cfg);
  }
};

}  // namespace

const Family& gpt2_family() {
  static const Gpt2Family family;
  return family;
}

}  // namespace llmcc::models
