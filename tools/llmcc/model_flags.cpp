#include "model_flags.h"

#include <cstdio>
#include <string>
#include <vector>

#include "llmcc/error.h"

namespace llmcc::cli {

namespace {

std::string text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The display names of the families that have `key` ("Llama and Qwen3"), "" when every family
// has it.
std::string families_with(const std::string& key) {
  std::string names;
  int count = 0;
  for (const models::Family* f : models::model_families())
    for (const models::ConfigKey& k : f->config_keys())
      if (key == k.name) {
        names += (names.empty() ? "" : " and ") + std::string(f->display_name());
        ++count;
      }
  return count == static_cast<int>(models::model_families().size()) ? "" : names;
}

const char* default_preset() { return models::model_families().front()->name(); }

}  // namespace

std::string model_flag_name(const std::string& key) {
  std::string flag = "--" + key;
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

void add_model_flags(ArgParser& p, ModelFlags& f) {
  std::string presets;
  for (const std::string& name : models::model_preset_names()) presets += (presets.empty() ? "" : ", ") + name;
  p.section("Model");
  p.add(
      "--model", &f.model,
      "preset (names the family): " + presets + " (default " + default_preset() + "; a loaded checkpoint's own shape)");
  for (const models::ConfigKey& k : models::model_config_keys()) {
    const std::string only = families_with(k.name);
    const std::string help = (only.empty() ? "" : only + ": ") + k.help + " (0: the preset's)";
    ModelFlags::Value& v = f.values[k.name];
    if (k.is_float)
      p.add(model_flag_name(k.name), &v.real, help);
    else
      p.add(model_flag_name(k.name), &v.integer, help);
  }
}

double ModelFlags::given(const std::string& key) const {
  const auto it = values.find(key);
  return it == values.end() ? 0.0 : (it->second.integer != 0 ? it->second.integer : it->second.real);
}

ModelConfig ModelFlags::config() const {
  const std::string name = model.empty() ? default_preset() : model;
  ModelConfig c = models::model_preset(name);
  for (const auto& [key, value] : values) {
    const double v = value.integer != 0 ? value.integer : value.real;
    const std::string flag = model_flag_name(key);
    if (!(v >= 0)) fail("model", flag + " must be positive, got " + text(v));
    if (v == 0) continue;
    if (!c.get(key)) fail("model", flag + " applies to " + families_with(key) + " models only, not to --model " + name);
    c.set(key, v);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    fail("model", std::string(e.what()) + " (from --model " + name + " and the --n-* overrides)");
  }
  return c;
}

bool ModelFlags::any() const {
  if (!model.empty()) return true;
  for (const auto& [key, value] : values)
    if (value.integer != 0 || value.real != 0.0f) return true;
  return false;
}

void ModelFlags::check_matches(const ModelConfig& actual, const std::string& source, const std::string& where) const {
  const char* hint = " (the model's shape comes from the file; drop the flag)";
  for (const auto& [key, value] : values) {
    const double v = value.integer != 0 ? value.integer : value.real;
    if (v == 0) continue;
    const std::string flag = model_flag_name(key);
    const std::optional<double> have = actual.get(key);
    if (!have)
      fail(where, flag + " conflicts with " + source + ", which holds a " + actual.display_name() + " model (no " +
                      key + ")" + hint);
    // Float keys compare as the float the config holds.
    const bool same = value.integer != 0 ? v == *have : static_cast<float>(v) == static_cast<float>(*have);
    if (!same)
      fail(where,
           flag + " " + text(v) + " conflicts with " + source + ", which holds " + key + " " + text(*have) + hint);
  }
  if (model.empty()) return;
  // A preset names a whole shape: its family, and every key it sets that no override replaced,
  // must agree.
  const ModelConfig preset = models::model_preset(model);
  if (&preset.family() != &actual.family())
    fail(where, "--model " + model + " (" + preset.display_name() + ") conflicts with " + source + ", which holds a " +
                    actual.display_name() + " model" + hint);
  for (const models::ConfigKey& k : preset.family().config_keys()) {
    if (given(k.name) != 0) continue;
    const std::optional<double> want = preset.get(k.name), have = actual.get(k.name);
    if (!want || !have || *want == *have) continue;
    fail(where, "--model " + model + " conflicts with " + source + ", which holds " + k.name + " " + text(*have) +
                    " (" + model + " has " + text(*want) + "; the model's shape comes from the file)");
  }
}

}  // namespace llmcc::cli
