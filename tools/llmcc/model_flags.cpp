#include "model_flags.h"

#include <string>

#include "llmcc/error.h"

namespace llmcc::cli {

namespace {

struct Override {
  const char* flag;
  const char* field;  // Gpt2Config's name, as errors and checkpoints spell it
  int ModelFlags::*value;
  int nn::Gpt2Config::*target;
};

constexpr Override kOverrides[] = {
    {"--n-layer", "n_layer", &ModelFlags::n_layer, &nn::Gpt2Config::n_layer},
    {"--n-head", "n_head", &ModelFlags::n_head, &nn::Gpt2Config::n_head},
    {"--n-embd", "n_embd", &ModelFlags::n_embd, &nn::Gpt2Config::n_embd},
    {"--max-seq-len", "max_seq_len", &ModelFlags::max_seq_len, &nn::Gpt2Config::max_seq_len},
    {"--vocab-size", "vocab_size", &ModelFlags::vocab_size, &nn::Gpt2Config::vocab_size},
};

}  // namespace

void add_model_flags(ArgParser& p, ModelFlags& f) {
  std::string presets;
  for (const std::string& name : nn::gpt2_preset_names()) presets += (presets.empty() ? "" : ", ") + name;
  p.section("Model");
  p.add("--model", &f.model, "preset: " + presets + " (default gpt2; a loaded checkpoint's own shape)");
  p.add("--n-layer", &f.n_layer, "transformer blocks (0: the preset's)");
  p.add("--n-head", &f.n_head, "attention heads; must divide --n-embd (0: the preset's)");
  p.add("--n-embd", &f.n_embd, "channels (0: the preset's)");
  p.add("--max-seq-len", &f.max_seq_len, "positions the model can see, rows of wpe (0: the preset's)");
  p.add("--vocab-size", &f.vocab_size,
        "token ids the model predicts; the embedding is padded to a multiple of 128 (0: 50257)");
}

nn::Gpt2Config ModelFlags::config() const {
  nn::Gpt2Config c = nn::gpt2_preset(model.empty() ? "gpt2" : model);
  for (const Override& o : kOverrides) {
    const int v = this->*o.value;
    if (v < 0) fail("model", std::string(o.flag) + " must be positive, got " + std::to_string(v));
    if (v > 0) c.*o.target = v;
  }
  if (vocab_size > 0) c.padded_vocab_size = nn::padded_vocab(vocab_size);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("model", std::string(e.what()) + " (from --model " + (model.empty() ? "gpt2" : model) +
                      " and the --n-* overrides)");
  }
  return c;
}

bool ModelFlags::any() const {
  if (!model.empty()) return true;
  for (const Override& o : kOverrides)
    if (this->*o.value != 0) return true;
  return false;
}

void ModelFlags::check_matches(const nn::Gpt2Config& actual, const std::string& source,
                               const std::string& where) const {
  for (const Override& o : kOverrides) {
    const int v = this->*o.value;
    if (v != 0 && v != actual.*o.target) {
      fail(where, std::string(o.flag) + " " + std::to_string(v) + " conflicts with " + source +
                      ", which holds " + o.field + " " + std::to_string(actual.*o.target) +
                      " (the model's shape comes from the file; drop the flag)");
    }
  }
  if (model.empty()) return;
  // A preset names a whole shape: every field it sets and no override replaced must agree.
  const nn::Gpt2Config preset = nn::gpt2_preset(model);
  for (const Override& o : kOverrides) {
    if (this->*o.value != 0) continue;
    if (preset.*o.target != actual.*o.target) {
      fail(where, "--model " + model + " conflicts with " + source + ", which holds " + o.field + " " +
                      std::to_string(actual.*o.target) + " (" + model + " has " +
                      std::to_string(preset.*o.target) + "; the model's shape comes from the file)");
    }
  }
}

}  // namespace llmcc::cli
