#include "models/registry.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "llmcc/error.h"
#include "models/gpt2/gpt2_family.h"
#include "models/hf_files.h"
#include "models/llama/llama_family.h"
#include "models/qwen3/qwen3_family.h"

namespace llmcc::models {

namespace {

std::string family_names() {
  std::string names;
  for (const Family* f : model_families()) names += (names.empty() ? "" : ", ") + std::string(f->name());
  return names;
}

}  // namespace

const std::vector<const Family*>& model_families() {
  // The first is the default: the family of checkpoints without model.family and of a new run
  // without --model.
  static const std::vector<const Family*> families = {&gpt2_family(), &llama_family(), &qwen3_family()};
  return families;
}

const Family* find_model_family(std::string_view name) {
  for (const Family* f : model_families())
    if (name == f->name()) return f;
  return nullptr;
}

ModelConfig model_preset(const std::string& name) {
  for (const Family* f : model_families())
    for (const std::string& n : f->preset_names())
      if (n == name) return f->preset(name);
  std::string names;
  for (const std::string& n : model_preset_names()) names += (names.empty() ? "" : ", ") + n;
  fail("model", "unknown preset '" + name + "' (expected one of: " + names + ")");
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> out;
  for (const Family* f : model_families())
    for (std::string& n : f->preset_names()) out.push_back(std::move(n));
  return out;
}

std::vector<ConfigKey> model_config_keys() {
  std::vector<ConfigKey> out;
  for (const Family* f : model_families())
    for (const ConfigKey& k : f->config_keys()) {
      bool seen = false;
      for (const ConfigKey& o : out) seen = seen || std::strcmp(o.name, k.name) == 0;
      if (!seen) out.push_back(k);
    }
  return out;
}

ModelConfig model_config_from_kv(const KeyValues& kv, const std::string& where) {
  const auto it = kv.find("model.family");
  const std::string name = it == kv.end() ? model_families().front()->name() : it->second;
  const Family* f = find_model_family(name);
  if (f == nullptr)
    fail("model", where + ": model.family = '" + name + "' is not a model family llmcc knows (" + family_names() + ")");
  return f->config_from_kv(kv, where);
}

ModelFile identify_model_file(const std::string& path) {
  ModelFile out;
  out.family = model_families().front();
  if (is_hf_model(path)) {
    out.kind = ModelFile::Kind::HuggingFace;
    const std::string type = hf_model_type(path);
    // A config.json without model_type goes to the default family, whose loader checks it.
    if (type.empty()) return out;
    for (const Family* f : model_families())
      if (type == f->hf_model_type()) {
        out.family = f;
        return out;
      }
    std::string types;
    for (const Family* f : model_families()) types += (types.empty() ? "" : ", ") + std::string(f->hf_model_type());
    fail("model", path + ": config.json's model_type is '" + type + "', not one llmcc reads (" + types + ")");
  }
  for (const Family* f : model_families())
    if (f->owns_file(path)) {
      out.kind = ModelFile::Kind::FamilyFile;
      out.family = f;
      return out;
    }
  char head[8] = {};
  std::size_t got = 0;
  if (std::FILE* file = std::fopen(path.c_str(), "rb")) {
    got = std::fread(head, 1, sizeof head, file);
    std::fclose(file);
  }
  if (got == sizeof head && std::memcmp(head, "LLMCCKPT", 8) == 0) {
    out.kind = ModelFile::Kind::LlmccCheckpoint;
    CheckpointReader reader(path);
    if (reader.has("config")) {
      const KeyValues kv = parse_key_values(reader.blob("config"), path + " [config]");
      if (const auto it = kv.find("model.family"); it != kv.end()) {
        out.family = find_model_family(it->second);
        if (out.family == nullptr)
          fail("model", path + ": model.family = '" + it->second + "' is not a model family llmcc knows (" +
                            family_names() + ")");
      }
    }
  }
  return out;
}

std::unique_ptr<Model> make_model(const ModelConfig& config) {
  config.validate();
  return config.family().make(config);
}

std::unique_ptr<Model> load_model(const std::string& path) { return identify_model_file(path).family->load(path); }

std::string model_path_help() {
  std::string out = "an llmcc checkpoint, ";
  for (const Family* f : model_families())
    if (const std::string own = f->own_files_help(); !own.empty()) out += own + ", ";
  return out +
         "or a Hugging Face model (a directory with config.json and model.safetensors or the shards of "
         "model.safetensors.index.json, or that file)";
}

void check_model_path(const std::string& path, const std::string& flag, const std::string& where) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) || is_hf_model(path)) return;
  const bool dir = std::filesystem::is_directory(path, ec);
  fail(where,
       flag + ": " + path +
           (dir ? " is a directory without model.safetensors or model.safetensors.index.json" : " does not exist") +
           "; give " + model_path_help());
}

}  // namespace llmcc::models
