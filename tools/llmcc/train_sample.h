// The trainer's periodic text samples: a few tokens generated from the start of a document,
// decoded with the run's tokenizer (run_tokenizer.h); without one, with GPT-2's when the model's
// vocabulary is GPT-2's and its files are found, otherwise shown as ids.
#pragma once

#include <string>

#include "llmcc/train/rng.h"
#include "llmcc/text/text_tokenizer.h"
#include "model_report.h"

namespace llmcc::cli {

struct SampleText {
  std::string text;      // decoded text, or the ids separated by spaces
  bool decoded = false;  // false: ids (no tokenizer for this vocabulary)
};

// Draws `tokens` new tokens on the family's KV-cache generator (Model::sample) using `rng` only, so the training
// trajectory never depends on sampling. `tok` (may be null) must have the model's vocabulary size: the sample then
// starts from its document start (GPT-2's <|endoftext|>, SentencePiece's bos) and is decoded with it.
SampleText sample_text(const Model& model, const TextTokenizer* tok, int tokens, float temperature, int top_k,
                       Rng& rng);

}  // namespace llmcc::cli
