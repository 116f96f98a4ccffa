// What GPT-2's and Llama's Hugging Face interchange share: finding model.safetensors and
// config.json, reading typed config.json fields with clear errors, layout helpers, and the final
// "every tensor in the file was used" check. The model-specific name and layout mappings are in
// models/gpt2/gpt2_hf.h and models/llama/llama_hf.h; the file format in llmcc/io/safetensors.h.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llmcc/io/safetensors.h"
#include "llmcc/tensor.h"

namespace llmcc {
struct JsonValue;  // io/json_reader.h, which only the .cpp files that read config.json include
}  // namespace llmcc

namespace llmcc::models {

inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";
inline constexpr const char* kHfConfigFile = "config.json";

// True for a directory holding model.safetensors or model.safetensors.index.json, or a file that
// starts like a safetensors file (a header length within the file, then '{'). Never throws.
bool is_hf_model(const std::string& path);

struct HfFiles {
  std::string weights;  // .../model.safetensors, or .../model.safetensors.index.json (shards)
  std::string config;   // .../config.json
};
// `path` is a model directory, a .safetensors file or a shard index with config.json beside it.
// A directory's model.safetensors is taken before its index, as transformers does. Throws
// llmcc::Error("[<where>] ...") saying which file is missing.
HfFiles find_hf_files(const std::string& path, const std::string& where);

// config.json's "torch_dtype" for weights written as d: "float32", "bfloat16", "float16".
const char* hf_torch_dtype(SafetensorsDType d);

// Writes a model's tensors (write_safetensors_model: one file or shards, in options.dtype) and
// config.json into dir, which is created if needed; the weights first, so a config.json never
// describes weights that are not there yet.
void write_hf_model(const std::string& dir, const std::vector<SafetensorsTensor>& tensors,
                    const std::string& config_json, const SafetensorsModelOptions& options, const std::string& where);

// config.json parsed, and typed access that names the file and key on error.
struct HfConfig {
  std::string path;
  std::string where;
  std::shared_ptr<const JsonValue> file;  // the whole parsed file, kept alive by every view of it
  const JsonValue* json = nullptr;        // the object read: the file's top level, or one object in it

  // Typed access to the object at `key` (errors still name this file).
  HfConfig member(const std::string& key) const;

  static HfConfig read(const std::string& path, const std::string& where);
  bool has(const std::string& key) const;              // present and not null
  std::int64_t integer(const std::string& key) const;  // required, a positive integer
  double number(const std::string& key) const;         // required, a number
  std::string string(const std::string& key) const;    // required, a string
  bool boolean(const std::string& key) const;          // required, true or false
  [[noreturn]] void fail_key(const std::string& key, const std::string& what) const;
  // Throws naming the first key that is neither in `known` (the keys the family's reader looks
  // at) nor one every family may ignore (kHfIgnoredKeys: versions, dtype, token ids,
  // initialisation, dropouts, caching and output flags): a key llmcc does not know might change
  // what the model computes, and a model that loads and computes something else is worse than
  // an error. A quantized checkpoint (quantization_config) is refused as such.
  void check_known_keys(std::initializer_list<std::string_view> known) const;
  // Throws unless "architectures", when present, names one of `accepted` (a LlamaForCausalLM
  // reader refuses LlamaForSequenceClassification weights, whose head is another).
  void check_architecture(std::initializer_list<std::string_view> accepted) const;
};

// "model_type" of the config.json of a model directory or beside a .safetensors file ("gpt2",
// "llama", ...), or "" when there is none or it cannot be read. Never throws.
std::string hf_model_type(const std::string& path);

// Writes text to path atomically.
void write_text_file(const std::string& path, const std::string& text, const std::string& where);

// dst (cols, rows) = src (rows, cols) transposed; both row-major.
void transpose(const float* src, std::int64_t rows, std::int64_t cols, float* dst);

// The rows of a rotary projection (q or k: n_heads heads of head_dim rows, each row `cols`
// floats) between llmcc's order and transformers'. llmcc's rope (llmcc/ops/rope.h) rotates
// interleaved pairs (rows 2i, 2i + 1 of a head), as Meta's and llama2.c's code; transformers
// rotates halves (rows i, i + head_dim/2), so Hugging Face files store each head's rows reordered:
// HF row h * head_dim/2 + i is llmcc row 2i + h (h = 0, 1; i < head_dim/2). to_hf: llmcc -> HF
// order, else the inverse.
void hf_permute_rotary(const float* src, int n_heads, int head_dim, std::int64_t cols, bool to_hf, float* dst);

// The Hugging Face tensor behind one of a model's parameters: its name, and the heads whose rows
// hf_permute_rotary reorders (q, k; Qwen3's q and k norm gains: one head), 0 for the same layout.
struct HfTensor {
  std::string name;
  int rotary_heads = 0;
};
// Reads each parameter, keyed by its declared tensor, from `r` in llmcc's layout (a streamed
// export's models::TensorReader). `declared` owns those tensors and lives as long as the reader.
std::function<void(const Tensor&, float*)> hf_tensor_reader(std::shared_ptr<const SafetensorsReader> r,
                                                            std::unordered_map<const Tensor*, HfTensor> tensors,
                                                            int head_dim, std::shared_ptr<const void> declared);

// Throws naming the file and the tensors nobody asked for, when there are any.
void check_no_unexpected_tensors(const SafetensorsReader& r, const std::string& where, const std::string& model);

// Throws the reader's error ("no tensor 'x'", "shape (a, b), expected (c, d)") unless r holds
// `name` with exactly `shape`. Loaders check every tensor this way before the model, sized by
// config.json, is allocated: the model then holds no more elements than the file, and a config
// describing a larger model than its file (a few hundred corrupt bytes asking for gigabytes)
// fails here instead of in the allocation.
void check_tensor_shape(const SafetensorsReader& r, const std::string& name, const TensorShape& shape);

// Throws unless a checkpoint's tensors (`stored` elements) can fill a model of `needed`, for the
// same reason: called before the model its configuration describes is allocated. `file` names
// the tensors, `config` where the configuration came from, `model` its shape ("L12 H12 C768 ...").
void check_weights_fit(std::int64_t stored, std::int64_t needed, const std::string& where, const std::string& file,
                       const std::string& config, const std::string& model);

// Throws when a layer config_path promises (0 <= l < n_layer) has no tensor
// `<prefix><l><suffix>` in r, naming the first missing one. Called before the model is
// allocated, so a config that names more layers than the file holds costs no memory.
void check_every_layer_present(const SafetensorsReader& r, const std::string& prefix, const std::string& suffix,
                               int n_layer, const std::string& config_path, const std::string& where);

}  // namespace llmcc::models
