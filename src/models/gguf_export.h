// A model as llama.cpp reads it: one GGUF file with the architecture's hyper-parameters, the
// tokenizer and the weights, quantized as llama.cpp's own tools would (`llmcc export --format
// gguf --quant ...`; docs/data-format.md says which tensor gets which type).
//
// A family that llama.cpp knows gives its part (GgufModelParts: llama.cpp's architecture name,
// its keys, and its tensors under llama.cpp's names in the layout llama.cpp computes with);
// write_model_gguf adds what every file has (general.*, the tokenizer) and picks each tensor's
// type from the requested quantization.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "llmcc/io/gguf_writer.h"
#include "llmcc/tensor.h"
#include "llmcc/text/text_tokenizer.h"

namespace llmcc::models {

struct GgufModelParts {
  std::string arch;                 // general.architecture: "llama", "qwen3", "gpt2"
  GgufMetadata metadata;            // "<arch>.context_length" and the other keys of the architecture
  std::vector<GgufTensor> tensors;  // llama.cpp's names and layout; the types are chosen on writing
  int n_layer = 0;
  int vocab_rows = 0;  // rows of token_embd: the vocabulary the file's tokenizer must have

  // One of the architecture's keys: "<arch>." + key.
  void set(const std::string& key, GgufValue value) { metadata.set(arch + "." + key, std::move(value)); }
};

// What every architecture's part starts with: its name, its block count and token_embd's rows,
// and the keys all of llama.cpp's text architectures have (context_length, embedding_length,
// block_count, feed_forward_length, attention.head_count).
struct GgufShape {
  int context_length, embedding_length, block_count, feed_forward_length, head_count, vocab_rows;
};
GgufModelParts gguf_model_parts(std::string arch, const GgufShape& shape);

// Where a parameter's values come from when its GGUF tensor is written: `declared` is the model's
// tensor (its shape; its storage when the model is loaded), `out` takes its fp32 values in
// llmcc's layout. read_loaded() copies a loaded model's; a family's Hugging Face reader reads the
// folder's tensor then, one at a time, so an export never holds the whole model.
using TensorReader = std::function<void(const Tensor& declared, float* out)>;
TensorReader read_loaded();

// An llmcc tensor as ggml lays it out: the same values, the shape's order reversed (a (rows, cols)
// matrix is ne {cols, rows}). `rows`, when given, keeps only the first rows (a padded
// vocabulary's real ones). The tensor (and whatever `read` uses) must outlive the write.
GgufTensor gguf_tensor(std::string name, const Tensor& t, const TensorReader& read, std::int64_t rows = -1);

// What the 2-D weights become (1-D tensors, norms and biases, always stay f32).
enum class GgufQuant { F32, F16, BF16, Q8_0, Q4_0, Q4_K_M };
// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m"; false for anything else.
bool parse_gguf_quant(std::string_view name, GgufQuant* out);
const char* gguf_quant_name(GgufQuant q);
// "f32, f16, bf16, q8_0, q4_0, q4_k_m", for help and errors.
std::string gguf_quant_names();

// The type the tensor `name` (ne as ggml orders it) gets in a `quant` file of a model with
// n_layer blocks; has_output: the file has its own output.weight (else token_embd is the head).
GgmlType gguf_tensor_type(GgufQuant quant, const std::string& name, const std::vector<std::int64_t>& ne, int n_layer,
                          bool has_output);

struct GgufExportOptions {
  GgufQuant quant = GgufQuant::F16;
  const TextTokenizer* tokenizer = nullptr;  // required: a GGUF file carries its vocabulary
  std::string name;                          // general.name
};

// Writes `path` atomically. Throws llmcc::Error("[llmcc export] ...") when the tokenizer has more
// tokens than the model reads, or its vocabulary cannot be described.
void write_model_gguf(GgufModelParts parts, const GgufExportOptions& options, const std::string& path);

}  // namespace llmcc::models
