// ggml's tensor types as GGUF files store them (llama.cpp's ggml/src/ggml-common.h layouts), for
// llmcc's GGUF export: the float types, and the block-quantized ones a q8_0, q4_0 or q4_k_m file
// needs (Q4_K_M keeps some tensors in Q6_K, and a row too short for a 256-value super-block
// falls back to Q5_0 or Q8_0). llama.cpp's C library is not a Debian package, so the layouts are
// written here from their specification; tests/io/test_gguf_quants.cpp checks every type's round
// trip and error bound, and tests/hf/test_gguf_export.py reads the bytes back with the `gguf`
// package's own dequantizer.
//
// A row of n values is n / block_size blocks, each block_bytes bytes:
//   F32   1 value,    4 bytes
//   F16   1,          2      IEEE half
//   BF16  1,          2      the high half of the float
//   Q8_0  32,        34      f16 d, int8 q[32]:                      x = d * q
//   Q4_0  32,        18      f16 d, 16 bytes of nibbles:             x = d * (q - 8)
//                            (byte j: value j in the low nibble, value j + 16 in the high one)
//   Q5_0  32,        22      f16 d, u32 high bits, 16 bytes of nibbles: x = d * (q - 16)
//                            (bit j of the u32 is value j's fifth bit, bit j + 16 value j + 16's)
//   Q4_K  256,      144      f16 d, f16 dmin, 12 bytes of eight 6-bit scales and mins, 128 bytes
//                            of nibbles: x = d * scale_s * q - dmin * min_s for sub-block s of 32
//   Q6_K  256,      210      128 bytes of low nibbles, 64 bytes of high 2-bit pairs, int8
//                            scales[16], f16 d: x = d * scale_s * (q - 32), sub-blocks of 16
// (the K-type packings are spelled out in gguf_quants.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmcc {

// ggml_type's values.
enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q5_0 = 6,
  Q8_0 = 8,
  Q4_K = 12,
  Q6_K = 14,
  BF16 = 30,
};

const char* ggml_type_name(GgmlType t);  // "q4_K", as ggml names it
int ggml_block_size(GgmlType t);         // values per block
int ggml_block_bytes(GgmlType t);        // bytes per block
// Bytes of a row of n values; throws llmcc::Error("[gguf] ...") unless n is a multiple of the
// block size.
std::size_t ggml_row_bytes(GgmlType t, std::int64_t n);

// One row of n values (a multiple of the block size) to ggml_row_bytes(t, n) bytes, and back.
// The quantizers choose each block's scales to minimise its squared error (the K types weight
// each value by its size, as llama.cpp's reference quantizers do without an importance matrix).
void ggml_quantize_row(GgmlType t, const float* x, std::int64_t n, std::uint8_t* out);
void ggml_dequantize_row(GgmlType t, const std::uint8_t* in, std::int64_t n, float* out);

}  // namespace llmcc
