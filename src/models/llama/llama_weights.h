// A Llama with its storage, and its configuration as checkpoint key=value text.
//
//   LlamaWeights w = make_llama(llama_preset("llama-tiny"));  // shapes declared, storage zeroed
//   llama_init(w.model, seed);
//   LlamaWeights back = load_llama(path);                     // an llmcc checkpoint or HF files
#pragma once

#include <string>

#include "llmcc/parameters.h"
#include "llmcc/io/checkpoint.h"
#include "models/llama/llama.h"

namespace llmcc::models {

// The model's tensors point into params; a move keeps them valid (the buffer does not move).
struct LlamaWeights {
  Llama model;
  ParameterStore params;
};

LlamaWeights make_llama(const LlamaConfig& config);

// Keys "model.family" (llama), "model.vocab_size", "model.max_seq_len", "model.n_layer",
// "model.n_head", "model.n_kv_head", "model.n_embd", "model.hidden_dim", "model.rope_theta",
// "model.norm_eps" (floats written so that they read back to the same value), and with llama3 rope
// scaling "model.rope_scaling" (llama3), "model.rope_factor", "model.rope_low_freq_factor",
// "model.rope_high_freq_factor", "model.rope_original_max_position_embeddings" (absent: none).
void llama_config_to_kv(const LlamaConfig& config, KeyValues& kv);
// Throws llmcc::Error naming `where` and the missing or malformed key, or a file of another
// family.
LlamaConfig llama_config_from_kv(const KeyValues& kv, const std::string& where);

// Loads the weights of an llmcc checkpoint holding a Llama, or of a Hugging Face
// LlamaForCausalLM (a directory with model.safetensors and config.json, or the .safetensors file
// itself; see models/llama/llama_hf.h).
LlamaWeights load_llama(const std::string& path);

}  // namespace llmcc::models
