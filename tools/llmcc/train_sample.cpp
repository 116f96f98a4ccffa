#include "train_sample.h"

#include <memory>
#include <mutex>

#include "llmcc/error.h"

namespace llmcc::cli {

namespace {

// GPT-2's default files, loaded on the first sample of a run without a recorded tokenizer and
// kept; null when they are not found.
const TextTokenizer* default_gpt2() {
  static std::once_flag once;
  static std::unique_ptr<TextTokenizer> tok;
  std::call_once(once, [] {
    try {
      tok = load_text_tokenizer("gpt2");
    } catch (const Error&) {
      tok.reset();
    }
  });
  return tok.get();
}

}  // namespace

SampleText sample_text(const Model& model, const TextTokenizer* tok, int tokens, float temperature, int top_k,
                       Rng& rng) {
  const int V = model.config().vocab_size();
  if (tok == nullptr && V == 50257) tok = default_gpt2();
  if (tok != nullptr && tok->vocab_size() != V) tok = nullptr;
  models::SamplingConfig cfg;
  cfg.temperature = temperature;
  cfg.top_k = top_k;
  std::vector<std::int32_t> prompt;
  if (tok != nullptr && tok->document_start() >= 0) {
    prompt.push_back(tok->document_start());
    if (tok->eos() >= 0) cfg.eot = tok->eos();
  }
  // Without a tokenizer: GPT-2's <|endoftext|> starts the sample; a smaller vocabulary has no such
  // id, so its last id stands in.
  if (cfg.eot >= V) cfg.eot = V - 1;
  cfg.validate();
  const std::vector<std::int32_t> ids = model.sample(prompt, tokens, cfg, rng);
  SampleText out;
  if (tok != nullptr) {
    out.text = tok->decode(ids);
    out.decoded = true;
    return out;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) out.text += (i ? " " : "") + std::to_string(ids[i]);
  return out;
}

}  // namespace llmcc::cli
