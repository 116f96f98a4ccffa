#include "train_sample.h"

#include <memory>
#include <mutex>
#include <optional>

#include "llmcc/error.h"
#include "llmcc/train/tokenizer.h"

namespace llmcc::cli {

namespace {

// Loaded on the first sample and kept; empty when no tokenizer files are found.
const Gpt2Tokenizer* tokenizer() {
  static std::once_flag once;
  static std::unique_ptr<Gpt2Tokenizer> tok;
  std::call_once(once, [] {
    try {
      tok = std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load_default());
    } catch (const Error&) {
      tok.reset();
    }
  });
  return tok.get();
}

}  // namespace

SampleText sample_text(const Model& model, int tokens, float temperature, int top_k, Rng& rng) {
  const int V = model.config().vocab_size();
  nn::SamplingConfig cfg;
  cfg.temperature = temperature;
  cfg.top_k = top_k;
  // GPT-2's <|endoftext|> starts the sample; a smaller vocabulary has no such id, so its last id
  // stands in.
  if (cfg.eot >= V) cfg.eot = V - 1;
  cfg.validate();
  const std::vector<std::int32_t> ids = model.sample({}, tokens, cfg, rng);
  SampleText out;
  const Gpt2Tokenizer* tok = V == 50257 ? tokenizer() : nullptr;
  if (tok != nullptr && tok->vocab_size() == V) {
    out.text = tok->decode(ids);
    out.decoded = true;
    return out;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) out.text += (i ? " " : "") + std::to_string(ids[i]);
  return out;
}

}  // namespace llmcc::cli
