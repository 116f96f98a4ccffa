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
// Reading converts F32, BF16 and F16 to fp32 (every BF16 and F16 value is exact in fp32).
// write_safetensors writes F32 tensors atomically (<path>.tmp, fsync, rename).
//
//   SafetensorsReader r("model.safetensors");
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
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&&) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&&) noexcept;

  const std::string& path() const;
  const std::vector<SafetensorsEntry>& tensors() const { return entries_; }  // in header order
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  bool has(std::string_view name) const { return find(name) != nullptr; }
  const SafetensorsEntry* find(std::string_view name) const;

  // Converts tensor `name` to fp32 into out (shape.numel floats) and marks it read. Throws
  // naming the file and tensor when it is missing ("no tensor 'x'"), has another shape, or a
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

  struct Mapping;
  std::unique_ptr<Mapping> map_;
  std::vector<SafetensorsEntry> entries_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  const unsigned char* data_ = nullptr;  // start of the data section
  mutable std::vector<char> read_;       // per entry: read or skipped
};

// One tensor to write: `fill` writes its numel(shape) fp32 values to the buffer it is given
// (so a caller can transpose or permute on the way out without a second copy of the model).
struct SafetensorsTensor {
  std::string name;
  TensorShape shape;
  std::function<void(float* out)> fill;
};

// A tensor whose values are already laid out as stored.
SafetensorsTensor safetensors_tensor(std::string name, TensorShape shape, const float* data);

// Writes F32 tensors in the given order (the header is padded with spaces so the data starts
// 8-byte aligned), with `metadata` as __metadata__. Names must be unique, non-empty and not
// "__metadata__". Atomic: readers see the old file or the complete new one.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace llmcc
