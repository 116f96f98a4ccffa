#include "model_flags.h"

#include <cstdio>
#include <string>

#include "llmcc/error.h"

namespace llmcc::cli {

namespace {

// An integer field: its flag, its name in configs and errors, and where it lives in each family
// (null: the family has no such field).
struct Override {
  const char* flag;
  const char* field;
  int ModelFlags::* value;
  int nn::Gpt2Config::* gpt2;
  int nn::LlamaConfig::* llama;
};

constexpr Override kOverrides[] = {
    {"--n-layer", "n_layer", &ModelFlags::n_layer, &nn::Gpt2Config::n_layer, &nn::LlamaConfig::n_layer},
    {"--n-head", "n_head", &ModelFlags::n_head, &nn::Gpt2Config::n_head, &nn::LlamaConfig::n_head},
    {"--n-kv-head", "n_kv_head", &ModelFlags::n_kv_head, nullptr, &nn::LlamaConfig::n_kv_head},
    {"--n-embd", "n_embd", &ModelFlags::n_embd, &nn::Gpt2Config::n_embd, &nn::LlamaConfig::n_embd},
    {"--hidden-dim", "hidden_dim", &ModelFlags::hidden_dim, nullptr, &nn::LlamaConfig::hidden_dim},
    {"--max-seq-len", "max_seq_len", &ModelFlags::max_seq_len, &nn::Gpt2Config::max_seq_len,
     &nn::LlamaConfig::max_seq_len},
    {"--vocab-size", "vocab_size", &ModelFlags::vocab_size, &nn::Gpt2Config::vocab_size, &nn::LlamaConfig::vocab_size},
};

// Llama's float fields.
struct FloatOverride {
  const char* flag;
  const char* field;
  float ModelFlags::* value;
  float nn::LlamaConfig::* llama;
};

constexpr FloatOverride kFloatOverrides[] = {
    {"--rope-theta", "rope_theta", &ModelFlags::rope_theta, &nn::LlamaConfig::rope_theta},
    {"--norm-eps", "norm_eps", &ModelFlags::norm_eps, &nn::LlamaConfig::norm_eps},
};

std::string text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

// The field's value in `c`; false when c's family has no such field.
bool field_of(const Override& o, const ModelConfig& c, int* out) {
  if (c.family == Family::Llama) {
    if (o.llama == nullptr) return false;
    *out = c.llama.*o.llama;
    return true;
  }
  if (o.gpt2 == nullptr) return false;
  *out = c.gpt2.*o.gpt2;
  return true;
}

}  // namespace

void add_model_flags(ArgParser& p, ModelFlags& f) {
  std::string presets;
  for (const std::string& name : model_preset_names()) presets += (presets.empty() ? "" : ", ") + name;
  p.section("Model");
  p.add("--model", &f.model,
        "preset (names the family): " + presets + " (default gpt2; a loaded checkpoint's own shape)");
  p.add("--n-layer", &f.n_layer, "transformer blocks (0: the preset's)");
  p.add("--n-head", &f.n_head, "attention (query) heads; must divide --n-embd (0: the preset's)");
  p.add("--n-kv-head", &f.n_kv_head, "Llama: key/value heads, must divide --n-head (0: the preset's)");
  p.add("--n-embd", &f.n_embd, "channels (0: the preset's)");
  p.add("--hidden-dim", &f.hidden_dim, "Llama: SwiGLU hidden width (0: the preset's)");
  p.add("--max-seq-len", &f.max_seq_len,
        "positions the model can see (GPT-2: rows of wpe; Llama: longest sequence) (0: the preset's)");
  p.add("--vocab-size", &f.vocab_size,
        "token ids the model predicts; GPT-2 pads its embedding to a multiple of 128 (0: the preset's)");
  p.add("--rope-theta", &f.rope_theta, "Llama: RoPE base (0: the preset's, 10000 or 500000)");
  p.add("--norm-eps", &f.norm_eps, "Llama: RMSNorm epsilon (0: the preset's, 1e-5)");
}

ModelConfig ModelFlags::config() const {
  const std::string name = model.empty() ? "gpt2" : model;
  ModelConfig c = model_preset(name);
  for (const Override& o : kOverrides) {
    const int v = this->*o.value;
    if (v < 0) fail("model", std::string(o.flag) + " must be positive, got " + std::to_string(v));
    if (v == 0) continue;
    if (c.family == Family::Llama) {
      c.llama.*o.llama = v;
    } else if (o.gpt2 != nullptr) {
      c.gpt2.*o.gpt2 = v;
    } else {
      fail("model", std::string(o.flag) + " applies to Llama models only, not to --model " + name);
    }
  }
  for (const FloatOverride& o : kFloatOverrides) {
    const float v = this->*o.value;
    if (!(v >= 0.0f)) fail("model", std::string(o.flag) + " must be positive, got " + text(v));
    if (v == 0.0f) continue;
    if (c.family != Family::Llama)
      fail("model", std::string(o.flag) + " applies to Llama models only, not to --model " + name);
    c.llama.*o.llama = v;
  }
  if (c.family == Family::Gpt2 && vocab_size > 0) c.gpt2.padded_vocab_size = nn::padded_vocab(vocab_size);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("model", std::string(e.what()) + " (from --model " + name + " and the --n-* overrides)");
  }
  return c;
}

bool ModelFlags::any() const {
  if (!model.empty()) return true;
  for (const Override& o : kOverrides)
    if (this->*o.value != 0) return true;
  for (const FloatOverride& o : kFloatOverrides)
    if (this->*o.value != 0.0f) return true;
  return false;
}

void ModelFlags::check_matches(const ModelConfig& actual, const std::string& source, const std::string& where) const {
  const char* hint = " (the model's shape comes from the file; drop the flag)";
  for (const Override& o : kOverrides) {
    const int v = this->*o.value;
    if (v == 0) continue;
    int have = 0;
    if (!field_of(o, actual, &have))
      fail(where, std::string(o.flag) + " conflicts with " + source + ", which holds a " + actual.display_name() +
                      " model (no " + o.field + ")" + hint);
    if (v != have)
      fail(where, std::string(o.flag) + " " + std::to_string(v) + " conflicts with " + source + ", which holds " +
                      o.field + " " + std::to_string(have) + hint);
  }
  for (const FloatOverride& o : kFloatOverrides) {
    const float v = this->*o.value;
    if (v == 0.0f) continue;
    if (actual.family != Family::Llama)
      fail(where, std::string(o.flag) + " conflicts with " + source + ", which holds a " + actual.display_name() +
                      " model (no " + o.field + ")" + hint);
    if (v != actual.llama.*o.llama)
      fail(where, std::string(o.flag) + " " + text(v) + " conflicts with " + source + ", which holds " + o.field + " " +
                      text(actual.llama.*o.llama) + hint);
  }
  if (model.empty()) return;
  // A preset names a whole shape: its family, and every field it sets that no override replaced,
  // must agree.
  const ModelConfig preset = model_preset(model);
  if (preset.family != actual.family)
    fail(where, "--model " + model + " (" + preset.display_name() + ") conflicts with " + source + ", which holds a " +
                    actual.display_name() + " model" + hint);
  for (const Override& o : kOverrides) {
    int want = 0, have = 0;
    if (this->*o.value != 0 || !field_of(o, preset, &want) || !field_of(o, actual, &have)) continue;
    if (want != have)
      fail(where, "--model " + model + " conflicts with " + source + ", which holds " + o.field + " " +
                      std::to_string(have) + " (" + model + " has " + std::to_string(want) +
                      "; the model's shape comes from the file)");
  }
  if (actual.family == Family::Llama) {
    for (const FloatOverride& o : kFloatOverrides) {
      if (this->*o.value != 0.0f || preset.llama.*o.llama == actual.llama.*o.llama) continue;
      fail(where, "--model " + model + " conflicts with " + source + ", which holds " + o.field + " " +
                      text(actual.llama.*o.llama) + " (" + model + " has " + text(preset.llama.*o.llama) +
                      "; the model's shape comes from the file)");
    }
  }
}

}  // namespace llmcc::cli
