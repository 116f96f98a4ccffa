// Qwen3 as llama.cpp's "qwen3" architecture reads it (models/gguf_export.h): llama.cpp rotates
// Qwen3's halves (rope type NEOX), as transformers does, so q, k and their per-head norm gains go
// out in Hugging Face's order (hf_permute_rotary), the rest as they are.
#pragma once

#include "models/gguf_export.h"
#include "models/qwen3/qwen3.h"

namespace llmcc::models {

// `read` gives each parameter's values (read_loaded() for a loaded model).
GgufModelParts qwen3_gguf_parts(const Qwen3& model, const TensorReader& read);

}  // namespace llmcc::models
