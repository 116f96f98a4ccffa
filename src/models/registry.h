// The model families llmcc knows, each described once (models/<family>/<family>_family.cpp) and
// listed in registry.cpp, and what works across them: presets, checkpoint configs, recognising
// a model path, making and loading models. The command line, benchmarks and tests go through
// these and never name a family.
//
//   ModelConfig c = model_preset("llama-tiny");        // any family's preset
//   std::unique_ptr<Model> m = make_model(c);          // then m->init(seed)
//   std::unique_ptr<Model> m = load_model(path);       // a checkpoint, HF directory, llm.c file
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llmcc/io/checkpoint.h"
#include "models/model.h"

namespace llmcc::models {

// Every family, in the order help texts list them.
const std::vector<const Family*>& model_families();
// The family called `name` (Family::name()); null when none is.
const Family* find_model_family(std::string_view name);

// Where a preset name belongs; throws llmcc::Error listing every family's presets.
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();  // every family's, family by family
// Every family's config keys, each once (the first family's help), in family order.
std::vector<ConfigKey> model_config_keys();

// The family named by "model.family" (absent: gpt2, as checkpoints written before there were
// other families), then that family's keys. Throws llmcc::Error naming `where` and the key.
ModelConfig model_config_from_kv(const KeyValues& kv, const std::string& where);

// What a model path holds: the one place llmcc tells checkpoints, Hugging Face models and
// family-specific files (an llm.c GPT-2 file) apart.
struct ModelFile {
  enum class Kind {
    LlmccCheckpoint,  // "LLMCCKPT" (docs/data-format.md)
    HuggingFace,      // a directory with config.json and model.safetensors, or that .safetensors
    FamilyFile,       // a format one family owns (Family::owns_file)
    Other,            // anything else: a file the loaders reject with a reason, or nothing
  };
  Kind kind = Kind::Other;
  // The family whose load() reads it; for Other, the default family (whose loader says what
  // is wrong with the file).
  const Family* family = nullptr;
};
// Throws llmcc::Error only for a Hugging Face model of a model_type no family reads, or an
// llmcc checkpoint of an unknown model.family.
ModelFile identify_model_file(const std::string& path);

// Parameters declared and zeroed (not initialised). Throws llmcc::Error for an invalid config.
std::unique_ptr<Model> make_model(const ModelConfig& config);
// The weights in `path`, whatever identify_model_file says it holds. An llmcc checkpoint of
// LoRA adapters (lora_from_kv) loads its base from lora.base, checks the base's CRC-32 against
// lora.base_crc32 and gives the model with its adapters.
std::unique_ptr<Model> load_model(const std::string& path);

// ---- LoRA (models/lora.h, lora_model.h) ----

// The identity of `base`'s weights for adapters trained on them: `path` made absolute, and the
// CRC-32 of its parameters' values in parameter list order.
LoraBase lora_base_of(const Model& base, const std::string& path);
// `base` (loaded from base_path) under new adapters of `cfg`, storage zeroed: init() draws them.
// Throws llmcc::Error when the family has no adapters or cfg names maps it does not have.
std::unique_ptr<Model> add_lora(std::unique_ptr<Model> base, const std::string& base_path, const LoraConfig& cfg);
// A LoRA model's keys in a checkpoint's config: lora.rank, lora.alpha, lora.targets (comma-
// separated), lora.base (the base's absolute path) and lora.base_crc32 (8 hex digits).
void lora_to_kv(const LoraInfo& info, KeyValues& kv);
// The LoRA keys of a checkpoint's config, or none when it has no lora.rank. Throws llmcc::Error
// naming `where` and a malformed or missing key.
std::optional<LoraInfo> lora_from_kv(const KeyValues& kv, const std::string& where);

// What load_model reads, for help texts: "an llmcc checkpoint, an llm.c GPT-2 model file (...)
// or a Hugging Face model (...)".
std::string model_path_help();

// Throws llmcc::Error("[where] <flag>: ...") unless `path` is something load_model reads: a
// file (an llmcc checkpoint, a family's own format, a .safetensors beside its config.json) or a
// Hugging Face model directory (config.json + model.safetensors).
void check_model_path(const std::string& path, const std::string& flag, const std::string& where);

}  // namespace llmcc::models
