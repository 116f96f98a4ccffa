// GPT-2 <-> Hugging Face transformers' GPT2LMHeadModel (model.safetensors + config.json).
//
//   llmcc (ours)                      Hugging Face                           layout
//   wte (Vp, C)                       transformer.wte.weight (V, C)          rows [0, V); pad rows zero on import
//   wpe (T, C)                        transformer.wpe.weight (T, C)          as is
//   h.N.ln_1.weight/bias (C)          transformer.h.N.ln_1.weight/bias       as is
//   h.N.attn.c_attn.weight (3C, C)    transformer.h.N.attn.c_attn.weight     (C, 3C): Conv1D, transposed
//   h.N.attn.c_attn.bias (3C)         transformer.h.N.attn.c_attn.bias       as is (q, k, v)
//   h.N.attn.c_proj.weight (C, C)     transformer.h.N.attn.c_proj.weight     (C, C) transposed
//   h.N.ln_2.*                        transformer.h.N.ln_2.*                 as is
//   h.N.mlp.c_fc.weight (4C, C)       transformer.h.N.mlp.c_fc.weight        (C, 4C) transposed
//   h.N.mlp.c_proj.weight (C, 4C)     transformer.h.N.mlp.c_proj.weight      (4C, C) transposed
//   ln_f.weight/bias (C)              transformer.ln_f.weight/bias           as is
//   (tied to wte)                     lm_head.weight                         not written; on import, if
//                                                                            present, must equal wte
// Import also reads files saved from GPT2Model (names without "transformer.", as the original
// openai-community/gpt2 model.safetensors) and skips the attention-mask buffers old files carry
// (h.N.attn.bias, h.N.attn.masked_bias). Weights may be F32, BF16 or F16; config.json gives the
// shape (n_embd, n_layer, n_head, n_positions, vocab_size) and must describe a model llmcc
// computes: GELU with the tanh approximation, layernorm epsilon 1e-5, n_inner 4 * n_embd, tied
// embeddings.
#pragma once

#include <string>
#include <vector>

#include "llmcc/io/safetensors.h"
#include "models/gpt2/gpt2_weights.h"
#include "models/lora_peft.h"

namespace llmcc::models {

// Writes dir/model.safetensors (F32) and dir/config.json; creates dir if needed.
void save_gpt2_hf(const Gpt2& model, const std::string& dir, const SafetensorsModelOptions& options = {});

// Reads a model directory or a model.safetensors with config.json beside it. Throws
// llmcc::Error naming the file and the tensor or key for anything missing, unexpected or wrong.
Gpt2Weights load_gpt2_hf(const std::string& path);

// config.json for GPT2LMHeadModel, and back.
std::string gpt2_hf_config_json(const Gpt2Config& config, const char* torch_dtype = "float32");
Gpt2Config gpt2_config_from_hf(const std::string& config_json_path);

// LoRA adapters as PEFT names them (models/lora_peft.h): the short names are transformers'
// module names (c_attn, c_proj, c_fc; PEFT's "c_proj" matches the attention's and the MLP's),
// and the slots of `lora` ("transformer.h.0.attn.c_attn", ...). transformers' GPT-2 maps are
// Conv1D layers (weights stored (in, out)), which PEFT's adapters mark with fan_in_fan_out; the
// adapters' own A (r, in) and B (out, r) are as for a Linear layer.
const PeftModuleNames& gpt2_peft_modules();
std::vector<PeftSlot> gpt2_peft_slots(const Gpt2& base, const Gpt2Lora& lora);

}  // namespace llmcc::models
