#include "models/registry.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "io/crc32.h"
#include "llmcc/error.h"
#include "models/gpt2/gpt2_family.h"
#include "models/hf_files.h"
#include "models/llama/llama_family.h"
#include "models/qwen3/qwen3_family.h"

namespace llmcc::models {

namespace {

// 9 significant digits: a float reads back exactly.
std::string format_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

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

LoraBase lora_base_of(const Model& base, const std::string& path) {
  detail::Crc32 crc;
  const ParameterStore& p = base.params();
  for (std::size_t i = 0; i < p.count(); ++i) {
    const Tensor t = p.tensor(i);
    crc.update(t.raw(), static_cast<std::size_t>(t.numel()) * sizeof(float));
  }
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return LoraBase{ec ? path : absolute.lexically_normal().string(), crc.value()};
}

std::unique_ptr<Model> add_lora(std::unique_ptr<Model> base, const std::string& base_path, const LoraConfig& cfg) {
  if (base->lora() != nullptr) fail("LoRA", base_path + " has adapters already; merge them first (llmcc export)");
  const Family& family = base->config().family();
  const std::vector<std::string> targets = family.lora_targets();
  if (targets.empty()) fail("LoRA", std::string(family.display_name()) + " models have no LoRA adapters");
  lora_check(cfg, targets);
  LoraBase identity = lora_base_of(*base, base_path);
  return family.with_lora(std::move(base), std::move(identity), cfg);
}

void lora_to_kv(const LoraInfo& info, KeyValues& kv) {
  std::string targets;
  for (const std::string& t : info.cfg.targets) targets += (targets.empty() ? "" : ",") + t;
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", static_cast<unsigned>(info.base.crc32));
  kv["lora.rank"] = std::to_string(info.cfg.rank);
  kv["lora.alpha"] = format_float(info.cfg.alpha);
  kv["lora.targets"] = targets;
  kv["lora.dropout"] = format_float(info.cfg.dropout);
  kv["lora.base"] = info.base.path;
  kv["lora.base_crc32"] = crc;
}

std::optional<LoraInfo> lora_from_kv(const KeyValues& kv, const std::string& where) {
  if (kv.find("lora.rank") == kv.end()) return std::nullopt;
  const auto get = [&](const char* key) -> const std::string& {
    const auto it = kv.find(key);
    if (it == kv.end()) fail("LoRA", where + ": has lora.rank but no " + key);
    return it->second;
  };
  LoraInfo info;
  try {
    std::size_t used = 0;
    info.cfg.rank = std::stoi(get("lora.rank"), &used);
    if (used != get("lora.rank").size()) throw std::invalid_argument("rank");
    info.cfg.alpha = std::stof(get("lora.alpha"), &used);
    if (used != get("lora.alpha").size()) throw std::invalid_argument("alpha");
    const std::string& crc = get("lora.base_crc32");
    info.base.crc32 = static_cast<std::uint32_t>(std::stoul(crc, &used, 16));
    if (used != crc.size() || crc.size() != 8) throw std::invalid_argument("crc");
  } catch (const std::logic_error&) {
    fail("LoRA", where + ": lora.rank, lora.alpha or lora.base_crc32 is malformed (" + get("lora.rank") + ", " +
                     get("lora.alpha") + ", " + get("lora.base_crc32") + ")");
  }
  info.cfg.targets = lora_targets_from(get("lora.targets"), where + " [lora.targets]");
  // Written since adapters have dropout; without it, none.
  if (const auto it = kv.find("lora.dropout"); it != kv.end()) {
    std::size_t used = 0;
    try {
      info.cfg.dropout = std::stof(it->second, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used == 0 || used != it->second.size() || !(info.cfg.dropout >= 0.0f && info.cfg.dropout < 1.0f))
      fail("LoRA", where + ": lora.dropout is '" + it->second + "', expected a probability in [0, 1)");
  }
  info.base.path = get("lora.base");
  return info;
}

namespace {

// A checkpoint of adapters: the base from its recorded path, checked, with the adapters read.
std::unique_ptr<Model> load_lora_checkpoint(const std::string& path, const LoraInfo& info) {
  std::error_code ec;
  if (!std::filesystem::exists(info.base.path, ec))
    fail("LoRA", path + ": the adapters' base model " + info.base.path + " (lora.base) does not exist");
  std::unique_ptr<Model> base = load_model(info.base.path);
  if (base->lora() != nullptr) fail("LoRA", path + ": the adapters' base " + info.base.path + " has adapters itself");
  const LoraBase found = lora_base_of(*base, info.base.path);
  if (found.crc32 != info.base.crc32) {
    char want[16], got[16];
    std::snprintf(want, sizeof want, "%08x", static_cast<unsigned>(info.base.crc32));
    std::snprintf(got, sizeof got, "%08x", static_cast<unsigned>(found.crc32));
    fail("LoRA", path + ": the adapters were trained on weights with CRC-32 " + want + ", but " + info.base.path +
                     " now holds weights with CRC-32 " + got +
                     "; adapters apply only to the weights they were trained on");
  }
  std::unique_ptr<Model> m = add_lora(std::move(base), info.base.path, info.cfg);
  CheckpointReader(path).read_tensors("params", m->params());
  return m;
}

}  // namespace

// A PEFT adapter directory: its base (base_model_name_or_path, a local model; relative to the
// working directory as peft reads it, else to the adapter's directory) with the adapters read.
std::unique_ptr<Model> load_peft_directory(const std::string& dir) {
  std::string base = peft_adapter_base(dir);
  std::error_code ec;
  if (!base.empty() && !std::filesystem::exists(base, ec) && std::filesystem::path(base).is_relative() &&
      std::filesystem::exists(std::filesystem::path(dir) / base, ec))
    base = (std::filesystem::path(dir) / base).string();
  if (base.empty() || !std::filesystem::exists(base, ec))
    fail("LoRA", dir + "/adapter_config.json: base_model_name_or_path '" + base +
                     "' is not a local model; the adapters need the weights they were trained on");
  std::unique_ptr<Model> model = load_model(base);
  if (model->lora() != nullptr) fail("LoRA", dir + ": the adapters' base " + base + " has adapters itself");
  const Family& family = model->config().family();
  const PeftAdapterConfig cfg = read_peft_adapter_config(dir, family.lora_hf_modules(), family.lora_hf_conv1d());
  model = add_lora(std::move(model), base, cfg.cfg);
  model->load_peft(dir);
  return model;
}

std::unique_ptr<Model> load_model(const std::string& path) {
  if (is_peft_adapter(path)) return load_peft_directory(path);
  const ModelFile file = identify_model_file(path);
  if (file.kind == ModelFile::Kind::LlmccCheckpoint) {
    CheckpointReader reader(path);
    if (reader.has("config")) {
      const KeyValues kv = parse_key_values(reader.blob("config"), path + " [config]");
      if (const std::optional<LoraInfo> info = lora_from_kv(kv, path)) return load_lora_checkpoint(path, *info);
    }
  }
  return file.family->load(path);
}

std::string model_path_help() {
  std::string out = "an llmcc checkpoint, ";
  for (const Family* f : model_families())
    if (const std::string own = f->own_files_help(); !own.empty()) out += own + ", ";
  return out +
         "a Hugging Face model (a directory with config.json and model.safetensors or the shards of "
         "model.safetensors.index.json, or that file), or a PEFT LoRA adapter directory (adapter_config.json, "
         "whose base_model_name_or_path is a local model)";
}

void check_model_path(const std::string& path, const std::string& flag, const std::string& where) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) || is_hf_model(path) || is_peft_adapter(path)) return;
  const bool dir = std::filesystem::is_directory(path, ec);
  fail(where,
       flag + ": " + path +
           (dir ? " is a directory without model.safetensors or model.safetensors.index.json" : " does not exist") +
           "; give " + model_path_help());
}

}  // namespace llmcc::models
