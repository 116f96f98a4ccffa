// LoRA adapters in PEFT's layout (models/lora_peft.h).
#include "models/lora_peft.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/json_reader.h"
#include "llmcc/error.h"
#include "llmcc/io/safetensors.h"
#include "models/hf_files.h"

namespace llmcc::models {

namespace {

constexpr const char* kWhere = "PEFT adapter";
constexpr const char* kPrefix = "base_model.model.";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kWhere, path + ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TensorShape shape_of(const Tensor& t) {
  TensorShape s;
  for (int i = 0; i < t.shape().ndim(); ++i) s.push_back(t.shape()[i]);
  return s;
}

}  // namespace

bool is_peft_adapter(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(std::filesystem::path(path) / "adapter_config.json", ec);
}

std::string peft_adapter_base(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "adapter_config.json").string();
  const JsonValue root = parse_json(read_text(path), path, kWhere);
  if (root.kind != JsonValue::Kind::Object) fail(kWhere, path + ": not a JSON object");
  const JsonValue* base = root.find("base_model_name_or_path");
  return base != nullptr && base->kind == JsonValue::Kind::String ? base->string : std::string();
}

PeftAdapterConfig read_peft_adapter_config(const std::string& dir, const PeftModuleNames& names, bool conv1d) {
  const std::string path = (std::filesystem::path(dir) / "adapter_config.json").string();
  const JsonValue root = parse_json(read_text(path), path, kWhere);
  if (root.kind != JsonValue::Kind::Object) fail(kWhere, path + ": not a JSON object");
  const auto bad = [&](const std::string& what) { fail(kWhere, path + ": " + what); };
  const auto get = [&](const char* key) -> const JsonValue* { return root.find(key); };
  const auto is_true = [&](const char* key) {
    const JsonValue* v = get(key);
    return v != nullptr && v->kind == JsonValue::Kind::Bool && v->boolean;
  };
  const auto non_empty = [&](const char* key) {
    const JsonValue* v = get(key);
    return v != nullptr && ((v->kind == JsonValue::Kind::Object && !v->object.empty()) ||
                            (v->kind == JsonValue::Kind::Array && !v->array.empty()) ||
                            v->kind == JsonValue::Kind::Number || v->kind == JsonValue::Kind::String);
  };
  const JsonValue* type = get("peft_type");
  if (type == nullptr || type->kind != JsonValue::Kind::String || type->string != "LORA")
    bad("peft_type is not \"LORA\"; llmcc reads LoRA adapters only");
  if (is_true("use_rslora")) bad("use_rslora is true; llmcc scales adapters by lora_alpha / r only");
  if (is_true("use_dora")) bad("use_dora is true; llmcc has no DoRA");
  // fan_in_fan_out says how the base's weights are stored, not the adapters': PEFT sets it for
  // Conv1D layers (and turns it off for Linear ones), so a Conv1D family reads either value.
  if (is_true("fan_in_fan_out") && !conv1d)
    bad("fan_in_fan_out is true; this family's maps are Linear layers, whose weights are not stored (in, out)");
  if (is_true("lora_bias")) bad("lora_bias is true; llmcc's adapters have no biases");
  if (const JsonValue* b = get("bias"); b != nullptr && !(b->kind == JsonValue::Kind::String && b->string == "none"))
    bad("bias is not \"none\"; llmcc's adapters have no biases");
  for (const char* key :
       {"rank_pattern", "alpha_pattern", "layers_to_transform", "modules_to_save", "layer_replication"})
    if (non_empty(key)) bad(std::string(key) + " is set; llmcc's adapters have one rank and alpha on every layer");
  PeftAdapterConfig out;
  const JsonValue* r = get("r");
  const JsonValue* alpha = get("lora_alpha");
  if (r == nullptr || !r->is_integer || r->integer < 1 || r->integer > (1 << 20)) bad("r is not a positive integer");
  if (alpha == nullptr || alpha->kind != JsonValue::Kind::Number || !(alpha->number > 0.0))
    bad("lora_alpha is not a positive number");
  out.cfg.rank = static_cast<int>(r->integer);
  out.cfg.alpha = static_cast<float>(alpha->number);
  if (const JsonValue* d = get("lora_dropout"); d != nullptr && d->kind != JsonValue::Kind::Null) {
    if (d->kind != JsonValue::Kind::Number || !(d->number >= 0.0 && d->number < 1.0))
      bad("lora_dropout is not a probability in [0, 1)");
    out.cfg.dropout = static_cast<float>(d->number);
  }
  const JsonValue* modules = get("target_modules");
  if (modules == nullptr || modules->kind != JsonValue::Kind::Array)
    bad("target_modules is not a list of module names (a pattern string is not read)");
  std::string known;
  for (const auto& [short_name, module] : names) known += (known.empty() ? "" : ", ") + module;
  for (const JsonValue& m : modules->array) {
    if (m.kind != JsonValue::Kind::String) bad("target_modules holds " + std::string(m.kind_name()));
    const auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.second == m.string; });
    if (it == names.end()) bad("target_modules names '" + m.string + "', not one of " + known);
    out.cfg.targets.push_back(it->first);
  }
  // The family's order, whatever the file's.
  std::vector<std::string> ordered;
  for (const auto& [short_name, module] : names)
    if (std::find(out.cfg.targets.begin(), out.cfg.targets.end(), short_name) != out.cfg.targets.end())
      ordered.push_back(short_name);
  if (ordered.size() != out.cfg.targets.size()) bad("target_modules names a module twice");
  out.cfg.targets = ordered;
  if (const JsonValue* base = get("base_model_name_or_path"); base != nullptr && base->kind == JsonValue::Kind::String)
    out.base = base->string;
  return out;
}

void read_peft_adapter(const std::string& dir, const std::vector<PeftSlot>& slots) {
  read_peft_tensors((std::filesystem::path(dir) / "adapter_model.safetensors").string(), slots);
}

void read_peft_tensors(const std::string& path, const std::vector<PeftSlot>& slots) {
  const SafetensorsReader reader(path);
  std::vector<float> tmp;
  for (const PeftSlot& s : slots) {
    reader.read_f32(kPrefix + s.module + ".lora_A.weight", shape_of(s.a), s.a.f32());
    const std::string b = kPrefix + s.module + ".lora_B.weight";
    if (s.rotary_heads == 0) {
      reader.read_f32(b, shape_of(s.b), s.b.f32());
      continue;
    }
    tmp.resize(static_cast<std::size_t>(s.b.numel()));
    reader.read_f32(b, shape_of(s.b), tmp.data());
    hf_permute_rotary(tmp.data(), s.rotary_heads, s.head_dim, s.b.shape()[1], /*to_hf=*/false, s.b.f32());
  }
  if (const std::vector<std::string> left = reader.unread(); !left.empty())
    fail(kWhere, path + ": tensor '" + left.front() + "' is not an adapter of the configured target modules");
}

void write_peft_adapter(const std::string& dir, const LoraInfo& info, const PeftModuleNames& names,
                        const std::vector<PeftSlot>& slots, bool conv1d) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(kWhere, dir + ": cannot create the directory (" + ec.message() + ")");
  std::string modules;
  for (const std::string& t : info.cfg.targets)
    for (const auto& [short_name, module] : names)
      if (short_name == t) modules += (modules.empty() ? "" : ", ") + json_quote(module);
  std::ostringstream json;
  json << "{\n"
       << "  \"peft_type\": \"LORA\",\n"
       << "  \"task_type\": \"CAUSAL_LM\",\n"
       << "  \"base_model_name_or_path\": " << json_quote(info.base.path) << ",\n"
       << "  \"r\": " << info.cfg.rank << ",\n"
       << "  \"lora_alpha\": " << json_number(info.cfg.alpha) << ",\n"
       << "  \"lora_dropout\": " << json_number(info.cfg.dropout) << ",\n"
       << "  \"target_modules\": [" << modules << "],\n"
       << "  \"bias\": \"none\",\n"
       << "  \"fan_in_fan_out\": " << (conv1d ? "true" : "false") << ",\n"
       << "  \"use_rslora\": false,\n"
       << "  \"use_dora\": false,\n"
       << "  \"inference_mode\": true\n"
       << "}\n";
  std::vector<SafetensorsTensor> tensors;
  for (const PeftSlot& s : slots) {
    tensors.push_back(safetensors_tensor(kPrefix + s.module + ".lora_A.weight", shape_of(s.a), s.a.f32()));
    if (s.rotary_heads == 0) {
      tensors.push_back(safetensors_tensor(kPrefix + s.module + ".lora_B.weight", shape_of(s.b), s.b.f32()));
    } else {
      const PeftSlot slot = s;
      tensors.push_back(SafetensorsTensor{kPrefix + s.module + ".lora_B.weight", shape_of(s.b), [slot](float* out) {
                                            hf_permute_rotary(slot.b.f32(), slot.rotary_heads, slot.head_dim,
                                                              slot.b.shape()[1], /*to_hf=*/true, out);
                                          }});
    }
  }
  write_safetensors((std::filesystem::path(dir) / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  write_text_file((std::filesystem::path(dir) / "adapter_config.json").string(), json.str(), kWhere);
}

}  // namespace llmcc::models
