// A GPT-2 with its storage, and its configuration as checkpoint key=value text.
//
//   Gpt2Weights w = make_gpt2(gpt2_preset("gpt2-tiny"));  // shapes declared, storage zeroed
//   gpt2_init(w.model, seed);
//   Gpt2Weights back = load_gpt2(path);  // an llmcc checkpoint or an llm.c model file
#pragma once

#include <memory>
#include <string>

#include "llmcc/parameters.h"
#include "llmcc/io/checkpoint.h"
#include "models/gpt2/gpt2.h"

namespace llmcc::models {

// The model's tensors point into params; a move keeps them valid (the buffer does not move).
struct Gpt2Weights {
  Gpt2 model;
  ParameterStore params;
};

Gpt2Weights make_gpt2(const Gpt2Config& config);

// Keys "model.family" (gpt2), "model.vocab_size", "model.padded_vocab_size",
// "model.max_seq_len", "model.n_layer", "model.n_head", "model.n_embd".
void gpt2_config_to_kv(const Gpt2Config& config, KeyValues& kv);
// Throws llmcc::Error naming `where` and the missing or malformed key.
Gpt2Config gpt2_config_from_kv(const KeyValues& kv, const std::string& where);

// Loads the weights of an llmcc checkpoint (its "config" section gives the shape, "params" the
// weights), of an llm.c GPT-2 model file (gpt2_124M.bin, fp32 or bf16; see nn/gpt2_llmc.h), or
// of a Hugging Face GPT2LMHeadModel (a directory with model.safetensors and config.json, or the
// .safetensors file itself; see models/gpt2/gpt2_hf.h), told apart by the file's first bytes.
Gpt2Weights load_gpt2(const std::string& path);

}  // namespace llmcc::models
