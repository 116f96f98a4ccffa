// GPT-2 as llama.cpp's "gpt2" architecture reads it (models/gguf_export.h): llmcc's linear
// weights are already (out, in) as ggml multiplies them (Hugging Face's Conv1D files are the
// transpose), q, k and v fused in one attn_qkv; the embedding's real vocab_size rows only, and no
// output.weight (the head is the embedding, as in Hugging Face's files and llama.cpp's reading).
#pragma once

#include "models/gguf_export.h"
#include "models/gpt2/gpt2.h"

namespace llmcc::models {

// `read` gives each parameter's values (read_loaded() for a loaded model).
GgufModelParts gpt2_gguf_parts(const Gpt2& model, const TensorReader& read);

}  // namespace llmcc::models
