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
// The weights in `path`, whatever identify_model_file says it holds.
std::unique_ptr<Model> load_model(const std::string& path);

// What load_model reads, for help texts: "an llmcc checkpoint, an llm.c GPT-2 model file (...)
// or a Hugging Face model (...)".
std::string model_path_help();

// Throws llmcc::Error("[where] <flag>: ...") unless `path` is something load_model reads: a
// file (an llmcc checkpoint, a family's own format, a .safetensors beside its config.json) or a
// Hugging Face model directory (config.json + model.safetensors).
void check_model_path(const std::string& path, const std::string& flag, const std::string& where);

}  // namespace llmcc::models
