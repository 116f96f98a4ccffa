// Safetensors files (Hugging Face's tensor container; docs/data-format.md):
//
//   [8 bytes]  N, little-endian uint64: the length of the header
//   [N bytes]  header: a JSON object, UTF-8, possibly padded with trailing spaces
//                {"__metadata__": {"format": "pt"},            (optional; string -> string)
//                 "wte.weight": {"dtype": "F32", "shape": [50257, 768], "data_offsets": [0, 154389504]},
//                 ...}
//   [rest]     tensor data; data_offsets are [begin, end) byte offsets into it, little-endian,
//              row-major. The tensors cover the data exactly: no holes, no overlaps.
//
// SafetensorsReader maps a file and validates the whole header up front, so a corrupt file fails
// before any weight is read, with an error naming the file and the tensor:
//   [safetensors] model.safetensors: tensor 'h.0.attn.c_attn.weight': data_offsets [0, 100) hold
//   100 bytes, but F32 (768, 2304) needs 7077888
// Reading converts F32, BF16 and F16 to fp32 (every BF16 and F16 value is exact in fp32), and
// then drops the tensor's pages of the mapped file from memory, so loading a model tensor by
// tensor holds its fp32 weights plus about one tensor of the file, never both in full.
// write_safetensors writes F32, BF16 or F16 tensors atomically (<path>.tmp, fsync, rename).
//
// A checkpoint split into shards (Hugging Face's save_pretrained with max_shard_size) is read
// through its index, model.safetensors.index.json:
//   {"metadata": {"total_size": <bytes of tensor data>},
//    "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors", ...}}
// SafetensorsReader given the index opens every shard it names (file names in the index's
// directory) and reads them as one file; write_safetensors_model writes either layout.
//
//   SafetensorsReader r("model.safetensors");       // or ".../model.safetensors.index.json"
//   r.read_f32("wpe.weight", {1024, 768}, dst);   // shape must match exactly
//   for (const std::string& name : r.unread()) ...  // tensors the caller did not ask for
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmcc {

using TensorShape = std::vector<std::int64_t>;

// "(50257, 768)"; "()" for a scalar.
std::string shape_str(const TensorShape& shape);

// Exact conversions to fp32 (IEEE binary16, and bfloat16 = the top 16 bits of an fp32).
float f16_to_f32(std::uint16_t h);
float bf16_bits_to_f32(std::uint16_t b);
// fp32 to bfloat16 and binary16, rounding to nearest with ties to even as PyTorch's .to() does:
// overflow gives infinity of the same sign, fp16's small values become subnormals or zero, and
// NaN gives a quiet NaN (bf16: 0x7FC0, PyTorch's; fp16: sign | 0x7E00).
std::uint16_t f32_to_bf16_bits(float x);
std::uint16_t f32_to_f16_bits(float x);

// The element types llmcc writes.
enum class SafetensorsDType { F32, BF16, F16 };
// "F32", "BF16", "F16"; and the dtype named so (case-insensitive, also "fp32", "bf16", "fp16",
// "f16", "float32", "bfloat16", "float16"), or false.
const char* dtype_name(SafetensorsDType d);
bool parse_safetensors_dtype(std::string_view name, SafetensorsDType* out);

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "BF16", "F16", "I64", ...
  TensorShape shape;
  std::uint64_t begin = 0;  // byte offsets into the data section (after the header)
  std::uint64_t end = 0;
};

class SafetensorsReader {
 public:
  // Throws llmcc::Error("[safetensors] <path>: ...") for a file that cannot be read or whose
  // header is invalid: too short, header length past the end, header not a JSON object, an entry
  // without dtype/shape/data_offsets, an unknown dtype, offsets out of range, overlapping or
  // leaving holes, a byte size that does not match dtype and shape, metadata that is not
  // string -> string.
  // A path ending in ".index.json" is a shard index: every shard it names is opened and checked
  // the same way, and besides, each shard's tensors must be exactly the ones the index maps to
  // it (errors name the index, the shard and the tensor).
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&&) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&&) noexcept;

  const std::string& path() const;                                           // the file, or the index of the shards
  const std::string& file_of(const SafetensorsEntry& e) const;               // the file holding e
  const std::vector<SafetensorsEntry>& tensors() const { return entries_; }  // in header order
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  bool has(std::string_view name) const { return find(name) != nullptr; }
  const SafetensorsEntry* find(std::string_view name) const;

  // Converts tensor `name` to fp32 into out (shape.numel floats) and marks it read. Throws
  // naming the file (the shard) and tensor when it is missing ("no tensor 'x'"), has another shape, or a
  // dtype other than F32, BF16 or F16.
  void read_f32(const std::string& name, const TensorShape& shape, float* out) const;
  // The same without a shape to check; returns the values and the tensor's shape.
  std::vector<float> read_f32(const std::string& name, TensorShape* shape = nullptr) const;

  // Names of tensors not read yet, in header order.
  std::vector<std::string> unread() const;
  // Marks a tensor as consumed without reading it (buffers a loader knowingly ignores).
  void skip(const std::string& name) const;

 private:
  const SafetensorsEntry& entry(const std::string& name) const;
  void open_shards(const std::string& index_path);

  struct Mapping;
  std::unique_ptr<Mapping> map_;
  std::vector<SafetensorsEntry> entries_;                      // every file's, in file order
  std::vector<std::pair<std::string, std::string>> metadata_;  // the (first) file's
  mutable std::vector<char> read_;                             // per entry: read or skipped
};

// A shard index as read_safetensors_index returns it.
struct SafetensorsIndex {
  std::vector<std::string> shards;                                // the distinct file names it maps to, sorted
  std::vector<std::pair<std::string, std::uint32_t>> weight_map;  // tensor -> position in shards, in file order
};
// True for a path whose file name ends with ".index.json".
bool is_safetensors_index(const std::string& path);
// Reads and checks an index: a JSON object whose "weight_map" is an object of tensor names to
// shard file names (plain names, without a directory: a shard lives beside its index), with an
// optional "metadata" object; other members are ignored. Throws llmcc::Error("[safetensors]
// <path>: ...") naming what is wrong.
SafetensorsIndex read_safetensors_index(const std::string& path);

// One tensor to write: `fill` writes its numel(shape) fp32 values to the buffer it is given
// (so a caller can transpose or permute on the way out without a second copy of the model).
struct SafetensorsTensor {
  std::string name;
  TensorShape shape;
  std::function<void(float* out)> fill;
};

// A tensor whose values are already laid out as stored.
SafetensorsTensor safetensors_tensor(std::string name, TensorShape shape, const float* data);

// Writes the tensors in the given order as `dtype` (converted from the fill's fp32 values; the
// header is padded with spaces so the data starts 8-byte aligned), with `metadata` as
// __metadata__. Names must be unique, non-empty and not "__metadata__". Atomic: readers see the
// old file or the complete new one.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::vector<std::pair<std::string, std::string>>& metadata = {},
                       SafetensorsDType dtype = SafetensorsDType::F32);

struct SafetensorsModelOptions {
  SafetensorsDType dtype = SafetensorsDType::F32;
  // Largest data bytes of one shard (0: one file). A tensor larger than this gets a shard of its
  // own, as in save_pretrained.
  std::uint64_t max_shard_bytes = 0;
};
// Writes a model's tensors into directory `dir` as Hugging Face does: model.safetensors when they
// fit one shard, else model-00001-of-0000N.safetensors ... in order, filled greedily, and
// model.safetensors.index.json (metadata.total_size and the weight map). The index is written
// last and the files of the other layout (a model.safetensors beside shards, an index and shards
// beside model.safetensors, shards of another count) are removed after it, so a reader finds the
// old checkpoint or the new one, never a mix. Returns the paths written, the index last.
std::vector<std::string> write_safetensors_model(const std::string& dir, const std::vector<SafetensorsTensor>& tensors,
                                                 const std::vector<std::pair<std::string, std::string>>& metadata,
                                                 const SafetensorsModelOptions& options);

}  // namespace llmcc
