// The model flags shared by train, eval, bench and generate: a preset and per-field overrides.
//
//   ModelFlags mf;
//   add_model_flags(parser, mf);      // --model, --n-layer, --n-head, --n-kv-head, --n-embd,
//   parser.parse(argc, argv);         // --hidden-dim, --max-seq-len, --vocab-size, --rope-theta,
//   ModelConfig c = mf.config();      // --norm-eps (under a "Model" heading); preset, then
//                                     // overrides; validated
//
// The preset names the family (gpt2*, llama-*, stories*). An override left at 0 keeps the
// preset's value; a Llama-only flag (--n-kv-head, --hidden-dim, --rope-theta, --norm-eps) on a
// GPT-2 is an error. GPT-2's --vocab-size also recomputes the padded vocab (llm.c's multiple of
// 128); Llama's vocabulary is not padded. When the model comes from a file (a checkpoint to
// resume, weights to start from), check_matches() turns any flag that contradicts the file into
// an error naming the flag, so a resumed run can never silently change shape.
#pragma once

#include <string>

#include "args.h"
#include "model_family.h"

namespace llmcc::cli {

struct ModelFlags {
  std::string model;  // preset name; empty: "gpt2" for a new model, the file's for a loaded one
  int n_layer = 0;    // 0: the preset's
  int n_head = 0;
  int n_kv_head = 0;  // Llama only
  int n_embd = 0;
  int hidden_dim = 0;  // Llama only
  int max_seq_len = 0;
  int vocab_size = 0;
  float rope_theta = 0.0f;  // Llama only
  float norm_eps = 0.0f;    // Llama only

  // The preset (default gpt2) with the overrides applied. Throws llmcc::Error naming the flag
  // for a negative value, a flag the family does not have, or an invalid combination (n_embd
  // not a multiple of n_head, ...).
  ModelConfig config() const;
  // True when any model flag was given (the preset or an override).
  bool any() const;
  // Throws llmcc::Error("[where] --n-layer 3 conflicts with <source>, which holds n_layer 2 ...")
  // for the first given flag whose value differs from `actual` (or a preset of another family).
  void check_matches(const ModelConfig& actual, const std::string& source, const std::string& where) const;
};

// Adds the model flags to `p` under a "Model" heading; values land in `flags`.
void add_model_flags(ArgParser& p, ModelFlags& flags);

}  // namespace llmcc::cli
