// Llama <-> Hugging Face transformers' LlamaForCausalLM (model.safetensors + config.json).
//
//   llmcc (Meta / llama2.c names)          Hugging Face                                   layout
//   tok_embeddings.weight (V, C)           model.embed_tokens.weight (V, C)               as is
//   layers.N.attention_norm.weight (C)     model.layers.N.input_layernorm.weight          as is
//   layers.N.attention.wq.weight (NH*HS, C) model.layers.N.self_attn.q_proj.weight        rows permuted (rotary)
//   layers.N.attention.wk.weight (NKV*HS, C) model.layers.N.self_attn.k_proj.weight       rows permuted (rotary)
//   layers.N.attention.wv.weight (NKV*HS, C) model.layers.N.self_attn.v_proj.weight       as is
//   layers.N.attention.wo.weight (C, NH*HS) model.layers.N.self_attn.o_proj.weight        as is
//   layers.N.ffn_norm.weight (C)           model.layers.N.post_attention_layernorm.weight as is
//   layers.N.feed_forward.w1.weight (F, C) model.layers.N.mlp.gate_proj.weight            as is
//   layers.N.feed_forward.w2.weight (C, F) model.layers.N.mlp.down_proj.weight            as is
//   layers.N.feed_forward.w3.weight (F, C) model.layers.N.mlp.up_proj.weight              as is
//   norm.weight (C)                        model.norm.weight                              as is
//   output.weight (V, C), when untied      lm_head.weight                                 as is; a tied model
//                                                                                         (tie_word_embeddings)
//                                                                                         has neither (a tied
//                                                                                         file's lm_head.weight
//                                                                                         copy is skipped)
// Rotary: q_proj's and k_proj's rows are stored in transformers' order (models/hf_files.h,
// hf_permute_rotary): export applies that permutation, import its inverse, so both libraries
// compute the same q and k.
//
// config.json must describe what llmcc computes: hidden_act silu, no rope_scaling, no attention or
// MLP biases, head_dim = hidden_size / num_attention_heads. A tied model (tie_word_embeddings, as
// Llama 3.2 1B) loads with output = a copy of the embedding (llmcc's Llama keeps them untied).
#pragma once

#include <memory>
#include <string>

#include "llmcc/io/safetensors.h"
#include "models/gguf_export.h"
#include "models/llama/llama_weights.h"
#include "models/lora_peft.h"

namespace llmcc::models {

// Writes dir/model.safetensors (F32, with lm_head.weight) and dir/config.json; creates dir.
void save_llama_hf(const Llama& model, const std::string& dir, const SafetensorsModelOptions& options = {});

// Reads a model directory or a model.safetensors with config.json beside it. Throws
// llmcc::Error naming the file and the tensor or key for anything missing, unexpected or wrong.
LlamaWeights load_llama_hf(const std::string& path);
// The same folder read one tensor at a time, for an export that never holds the whole model: the
// model's declared shapes (no storage) and a reader of each of its parameters in llmcc's layout
// (models/gguf_export.h). The folder is checked as load_llama_hf checks it, before any read.
struct LlamaHfStream {
  std::shared_ptr<const Llama> shapes;
  TensorReader read;
};
LlamaHfStream open_llama_hf(const std::string& path);

std::string llama_hf_config_json(const LlamaConfig& config, const char* torch_dtype = "float32");
// tie_word_embeddings sets LlamaConfig::tie_embeddings.
LlamaConfig llama_config_from_hf(const std::string& config_json_path);

// LoRA adapters as PEFT names them (models/lora_peft.h): the short names' module names (q ->
// q_proj, ..., gate -> gate_proj, up -> up_proj, down -> down_proj) and every adapter of `lora`
// with its module ("model.layers.N.self_attn.q_proj", "model.layers.N.mlp.down_proj").
const PeftModuleNames& llama_peft_modules();
std::vector<PeftSlot> llama_peft_slots(const Llama& base, const LlamaLora& lora);

}  // namespace llmcc::models
