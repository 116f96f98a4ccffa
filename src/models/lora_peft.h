// LoRA adapters in PEFT's layout: a directory as peft's save_pretrained writes it,
//
//   adapter_config.json        {"peft_type": "LORA", "r": 16, "lora_alpha": 32,
//                               "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM",
//                               "base_model_name_or_path": "<the base model's folder>", ...}
//   adapter_model.safetensors  base_model.model.<module>.lora_A.weight (r, in)
//                              base_model.model.<module>.lora_B.weight (out, r)
//
// where <module> is the Hugging Face name of an adapted linear map
// ("model.layers.0.self_attn.q_proj"). The adapters of a rotary projection (q, k) have B's rows
// in transformers' order, as the map's own rows (hf_permute_rotary). peft.PeftModel.from_pretrained
// loads such a directory onto the transformers model of the base.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "llmcc/tensor.h"
#include "models/lora.h"

namespace llmcc::models {

// One adapted map: its Hugging Face module name and llmcc's tensors of its adapter.
struct PeftSlot {
  std::string module;    // "model.layers.0.self_attn.q_proj"
  Tensor a, b;           // (r, in), (out, r)
  int rotary_heads = 0;  // q, k: heads whose B rows are permuted; 0 otherwise
  int head_dim = 0;
};

// A family's short map names and their Hugging Face module names ({"q", "q_proj"}, ...).
using PeftModuleNames = std::vector<std::pair<std::string, std::string>>;

// True for a directory with adapter_config.json.
bool is_peft_adapter(const std::string& path);

// dir/adapter_config.json's base_model_name_or_path ("" when absent). Throws llmcc::Error for a
// file that is not a JSON object.
std::string peft_adapter_base(const std::string& dir);

struct PeftAdapterConfig {
  LoraConfig cfg;    // targets as the family's short names
  std::string base;  // base_model_name_or_path
};
// Reads dir/adapter_config.json. Throws llmcc::Error naming the file and the key for what llmcc
// does not compute: a peft_type other than LORA, use_rslora, use_dora, a bias other than none,
// fan_in_fan_out on a family of Linear layers (conv1d false), lora_bias, rank_pattern or
// alpha_pattern entries, layers_to_transform, layer_replication, modules_to_save,
// target_modules as a pattern string or naming a module `names` does not have.
PeftAdapterConfig read_peft_adapter_config(const std::string& dir, const PeftModuleNames& names, bool conv1d = false);

// Fills every slot's A and B from dir/adapter_model.safetensors (F32, BF16 or F16). Throws
// llmcc::Error naming the tensor that is missing, of another shape, or left over.
void read_peft_adapter(const std::string& dir, const std::vector<PeftSlot>& slots);
// The same from any safetensors file of PEFT's tensor names (gradients stored like adapters).
void read_peft_tensors(const std::string& path, const std::vector<PeftSlot>& slots);

// Writes dir (created) with adapter_config.json for `info` (its base path as
// base_model_name_or_path, its targets by their module names, fan_in_fan_out = conv1d) and
// adapter_model.safetensors (F32) of the slots.
void write_peft_adapter(const std::string& dir, const LoraInfo& info, const PeftModuleNames& names,
                        const std::vector<PeftSlot>& slots, bool conv1d = false);

}  // namespace llmcc::models
