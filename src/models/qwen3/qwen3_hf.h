// Qwen3 <-> Hugging Face Qwen3ForCausalLM files (model.safetensors + config.json).
//
// llmcc's parameter names are transformers' ("model.layers.N.self_attn.q_norm.weight", ...),
// except the untied head: llmcc's "lm_head.0.weight" is "lm_head.weight"; a tied model has
// neither. Layouts are the same except where RoPE pairs channels: transformers rotates channel i
// with i + D/2 of each head (half-split), llmcc rotates 2i with 2i+1 (interleaved). So each
// head's rows of q_proj and k_proj, and the q_norm and k_norm gains (one head of D channels),
// are permuted on the way in and back on the way out; attention scores are unchanged by a
// permutation applied to q and k alike, and the per-head RMSNorm commutes with it.
#pragma once

#include <memory>
#include <string>

#include "llmcc/io/safetensors.h"
#include "models/gguf_export.h"
#include "models/lora_peft.h"
#include "models/qwen3/qwen3_weights.h"

namespace llmcc::models {

// Writes dir/model.safetensors (fp32, transformers' names and layouts) and dir/config.json.
// Creates dir; files are written atomically. Throws llmcc::Error on failure.
void save_qwen3_hf(const Qwen3& model, const std::string& dir, const SafetensorsModelOptions& options = {});

// A Qwen3ForCausalLM directory, or its .safetensors with config.json beside it. BF16 and F16
// weights become fp32. Throws llmcc::Error naming the file and key or tensor for anything llmcc's
// Qwen3 does not compute (biases, sliding-window attention, rope scaling, an activation other
// than silu), a missing or misshapen tensor, or a tensor nobody reads.
Qwen3Weights load_qwen3_hf(const std::string& path);
// The same folder read one tensor at a time, for an export that never holds the whole model: the
// model's declared shapes (no storage) and a reader of each of its parameters in llmcc's layout
// (models/gguf_export.h). The folder is checked as load_qwen3_hf checks it, before any read.
struct Qwen3HfStream {
  std::shared_ptr<const Qwen3> shapes;
  TensorReader read;
};
Qwen3HfStream open_qwen3_hf(const std::string& path);

// LoRA adapters as PEFT names them (models/lora_peft.h): the short names' module names and every
// adapter of `lora` with its module ("model.layers.N.self_attn.q_proj", ...).
const PeftModuleNames& qwen3_peft_modules();
std::vector<PeftSlot> qwen3_peft_slots(const Qwen3& base, const Qwen3Lora& lora);

// config.json for `config`, as transformers writes it.
std::string qwen3_hf_config_json(const Qwen3Config& config, const char* torch_dtype = "float32");
Qwen3Config qwen3_config_from_hf(const std::string& config_json_path);

}  // namespace llmcc::models
