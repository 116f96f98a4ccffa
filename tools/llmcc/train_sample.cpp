#include "train_sample.h"

#include "llmcc/error.h"

namespace llmcc::cli {

// Placeholder until nn::gpt2_sample (src/nn/gpt2_generate.cpp) lands: the trainer's samples then
// come from the KV-cache generator.
SampleText sample_text(const nn::Gpt2&, int, float, int, Rng&) {
  fail("llmcc train", "--sample-every: text generation is not available in this build yet");
}

}  // namespace llmcc::cli
