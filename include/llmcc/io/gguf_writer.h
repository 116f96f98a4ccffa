// GGUF version 3 files, as llama.cpp reads them (its gguf.h and docs/gguf.md in ggml): a header,
// metadata key-value pairs, tensor infos, then the tensors' data, each aligned to 32 bytes.
//
//   "GGUF", u32 version 3, u64 tensor count, u64 metadata count
//   metadata: string key, u32 value type, value        (string = u64 length + bytes, no NUL)
//   tensor infos: string name, u32 dims, u64 ne[dims] (ne[0] the contiguous dimension: a row-major
//                 (rows, cols) matrix is ne = {cols, rows}), u32 ggml type, u64 offset from the
//                 start of the data section
//   padding to 32, the data section
//
// Values are little-endian. write_gguf streams: the layout is computed first, then each tensor
// is filled, converted and written in turn, so memory holds one tensor's floats and bytes at a
// time. The file is written atomically (readers see the old file or the whole new one).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "llmcc/io/gguf_quants.h"

namespace llmcc {

// One metadata value: the GGUF types llama.cpp's keys use.
using GgufValue = std::variant<std::uint32_t, std::int32_t, float, bool, std::string, std::vector<std::string>,
                               std::vector<std::int32_t>, std::vector<float>>;

struct GgufMetadata {
  std::vector<std::pair<std::string, GgufValue>> entries;  // in the order written
  void set(std::string key, GgufValue value);              // replaces an earlier value of the key
};

struct GgufTensor {
  std::string name;
  std::vector<std::int64_t> ne;  // ggml order: ne[0] is the row length
  GgmlType type = GgmlType::F32;
  // Writes the tensor's values as fp32, ne[0] per row, rows in order.
  std::function<void(float* out)> fill;
};

// Writes `path`. Throws llmcc::Error("[gguf] ...") for a duplicate or empty name, a tensor
// whose row length its type cannot block, or an I/O failure (no file is left behind).
void write_gguf(const std::string& path, const GgufMetadata& metadata, const std::vector<GgufTensor>& tensors);

}  // namespace llmcc
