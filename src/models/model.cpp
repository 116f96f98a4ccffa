#include "models/model.h"

#include <algorithm>
#include <span>

#include "llmcc/error.h"

namespace llmcc::models {

const char* ModelConfig::family_name() const { return family().name(); }
const char* ModelConfig::display_name() const { return family().display_name(); }

void ModelConfig::set(std::string_view key, double value) {
  if (!c_->get(key)) fail("model", std::string(family().display_name()) + " has no config key " + std::string(key));
  // Copy on write: other copies keep the config they had.
  std::unique_ptr<FamilyConfig> changed = c_->clone();
  changed->set(key, value);
  c_ = std::move(changed);
}

std::unique_ptr<Model> Family::with_lora(std::unique_ptr<Model>, LoraBase, const LoraConfig&) const {
  fail("LoRA", std::string(display_name()) + " models have no LoRA adapters");
}

GgufModelParts Model::gguf_parts() const {
  if (lora() != nullptr) fail("llmcc export", "a GGUF file holds a plain model: merge the LoRA adapters first");
  fail("llmcc export", std::string("llama.cpp has no architecture for ") + config().display_name() + " models");
}

void Model::save_peft(const std::string&) const {
  fail("LoRA", "the model has no LoRA adapters to write in PEFT's layout");
}
void Model::load_peft(const std::string&) { fail("LoRA", "the model has no LoRA adapters to read PEFT's into"); }
std::size_t Model::store_base_in_bf16() {
  fail("LoRA", "only a model with LoRA adapters has a frozen base to store in bf16");
}

std::vector<std::int32_t> Model::sample(const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                        const SamplingConfig& cfg, Rng& rng,
                                        const std::function<void(std::int32_t)>& on_token) const {
  const std::unique_ptr<Generator> gen = generator(ContextFull::Slide);
  // A prompt longer than the context: its last max_seq_len tokens.
  std::span<const std::int32_t> window(prompt);
  if (window.size() > static_cast<std::size_t>(gen->max_length())) window = window.last(gen->max_length());
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(std::max(max_new_tokens, 0)));
  generate(*gen, window, max_new_tokens, cfg, rng, [&](std::int32_t id) {
    out.push_back(id);
    if (on_token) on_token(id);
  });
  return out;
}

}  // namespace llmcc::models
