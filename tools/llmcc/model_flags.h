// The model flags shared by train, eval, bench and generate: a preset and per-field overrides.
//
//   ModelFlags mf;
//   add_model_flags(parser, mf);      // --model, --n-layer, --n-head, --n-embd, --max-seq-len,
//   parser.parse(argc, argv);         // --vocab-size (under a "Model" heading)
//   nn::Gpt2Config c = mf.config();   // preset, then overrides; validated
//
// An override left at 0 keeps the preset's value. --vocab-size also recomputes the padded vocab
// (llm.c's multiple of 128). When the model comes from a file (a checkpoint to resume, weights
// to start from), check_matches() turns any flag that contradicts the file into an error naming
// the flag, so a resumed run can never silently change shape.
#pragma once

#include <string>

#include "args.h"
#include "nn/gpt2_config.h"

namespace llmcc::cli {

struct ModelFlags {
  std::string model;  // preset name; empty: "gpt2" for a new model, the file's for a loaded one
  int n_layer = 0;    // 0: the preset's
  int n_head = 0;
  int n_embd = 0;
  int max_seq_len = 0;
  int vocab_size = 0;

  // The preset (default gpt2) with the overrides applied. Throws llmcc::Error naming the flag
  // for a negative value or an invalid combination (n_embd not a multiple of n_head, ...).
  nn::Gpt2Config config() const;
  // True when any model flag was given (the preset or an override).
  bool any() const;
  // Throws llmcc::Error("[where] --n-layer 3 conflicts with <source>, which holds n_layer 2 ...")
  // for the first given flag whose value differs from `actual`.
  void check_matches(const nn::Gpt2Config& actual, const std::string& source, const std::string& where) const;
};

// Adds the model flags to `p` under a "Model" heading; values land in `flags`.
void add_model_flags(ArgParser& p, ModelFlags& flags);

}  // namespace llmcc::cli
