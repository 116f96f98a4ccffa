// A Qwen3 with its storage, and its configuration as checkpoint key=value text.
//
//   Qwen3Weights w = make_qwen3(qwen3_preset("qwen3-tiny"));  // shapes declared, storage zeroed
//   qwen3_init(w.model, seed);
//   Qwen3Weights back = load_qwen3(path);                     // an llmcc checkpoint or HF files
#pragma once

#include <string>

#include "llmcc/parameters.h"
#include "llmcc/io/checkpoint.h"
#include "models/qwen3/qwen3.h"

namespace llmcc::models {

// The model's tensors point into params; a move keeps them valid (the buffer does not move).
struct Qwen3Weights {
  Qwen3 model;
  ParameterStore params;
};

Qwen3Weights make_qwen3(const Qwen3Config& config);

// Keys "model.family" (qwen3), "model.vocab_size", "model.max_seq_len", "model.n_layer",
// "model.n_head", "model.n_kv_head", "model.n_embd", "model.head_dim", "model.hidden_dim",
// "model.rope_theta", "model.norm_eps" (floats written so that they read back to the same
// value) and "model.tie_embeddings" (true or false).
void qwen3_config_to_kv(const Qwen3Config& config, KeyValues& kv);
// Throws llmcc::Error naming `where` and the missing or malformed key, or a file of another
// family.
Qwen3Config qwen3_config_from_kv(const KeyValues& kv, const std::string& where);

// Loads the weights of an llmcc checkpoint holding a Qwen3, or of a Hugging Face
// Qwen3ForCausalLM (a directory with model.safetensors and config.json, or the .safetensors
// file itself; see qwen3_hf.h).
Qwen3Weights load_qwen3(const std::string& path);

}  // namespace llmcc::models
