// The trainer's periodic text samples: a few tokens generated from <|endoftext|>, decoded with the
// GPT-2 tokenizer when the model's vocabulary is GPT-2's and one can be found (otherwise the ids).
#pragma once

#include <string>

#include "llmcc/train/rng.h"
#include "model_family.h"

namespace llmcc::cli {

struct SampleText {
  std::string text;      // decoded text, or the ids separated by spaces
  bool decoded = false;  // false: ids (no tokenizer for this vocabulary)
};

// Draws `tokens` new tokens with the family's sampler (Model::sample: GPT-2's KV-cache generator,
// Llama's full-forward sampler) using `rng` only, so the training trajectory never depends on
// sampling.
SampleText sample_text(const Model& model, int tokens, float temperature, int top_k, Rng& rng);

}  // namespace llmcc::cli
