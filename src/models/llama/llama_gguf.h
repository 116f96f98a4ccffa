// Llama as llama.cpp's "llama" architecture reads it (models/gguf_export.h): Meta's tensor layout,
// which is llmcc's (RoPE on adjacent pairs, llama.cpp's rope type 0), so q and k go out as they
// are; Llama 3's rope scaling as the rope_freqs.weight factors llama.cpp divides frequencies by.
#pragma once

#include "models/gguf_export.h"
#include "models/llama/llama.h"

namespace llmcc::models {

// `read` gives each parameter's values (read_loaded() for a loaded model).
GgufModelParts llama_gguf_parts(const Llama& model, const TensorReader& read);

}  // namespace llmcc::models
