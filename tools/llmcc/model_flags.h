// The model flags shared by train, eval, bench and generate: a preset and per-key overrides.
//
//   ModelFlags mf;
//   add_model_flags(parser, mf);      // --model, then one flag per config key of any family
//   parser.parse(argc, argv);         // (models::model_config_keys(): --n-layer for n_layer, ...)
//   ModelConfig c = mf.config();      // preset, then overrides; validated
//
// The preset names the family. An override left at 0 keeps the preset's value; a key the
// preset's family does not have is an error naming the families that have it. When the model
// comes from a file (a checkpoint to resume, weights to start from), check_matches() turns any
// flag that contradicts the file into an error naming the flag, so a resumed run can never
// silently change shape.
#pragma once

#include <map>
#include <string>

#include "args.h"
#include "model_report.h"

namespace llmcc::cli {

struct ModelFlags {
  std::string model;  // preset name; empty: the default family's first preset for a new model
  // Per config key ("n_layer"), the value given (0: not given). Integer keys parse as integers.
  struct Value {
    int integer = 0;
    float real = 0.0f;
  };
  std::map<std::string, Value> values;

  // The value given for `key` as a double; 0 when not given.
  double given(const std::string& key) const;
  // The preset with the overrides applied. Throws llmcc::Error naming the flag for a negative
  // value, a key the family does not have, or an invalid combination (n_embd not a multiple of
  // n_head, ...).
  ModelConfig config() const;
  // True when any model flag was given (the preset or an override).
  bool any() const;
  // Throws llmcc::Error("[where] --n-layer 3 conflicts with <source>, which holds n_layer 2 ...")
  // for the first given flag whose value differs from `actual` (or a preset of another family).
  void check_matches(const ModelConfig& actual, const std::string& source, const std::string& where) const;
};

// "--n-layer" for "n_layer".
std::string model_flag_name(const std::string& key);

// Adds the model flags to `p` under a "Model" heading; values land in `flags`.
void add_model_flags(ArgParser& p, ModelFlags& flags);

}  // namespace llmcc::cli
