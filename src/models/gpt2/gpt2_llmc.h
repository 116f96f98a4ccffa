// llm.c's GPT-2 model file (gpt2_124M.bin, gpt2_124M_bf16.bin): import and export.
//
// The layout (llm.c's train_gpt2.py write_model, read by gpt2_build_from_checkpoint), all
// little-endian:
//   header: 256 int32
//     [0] magic 20240326   [1] version: 3 = fp32 weights, 5 = bf16 weights
//     [2] maxT  [3] V  [4] L  [5] NH  [6] C  [7] Vp (padded vocab)   [8..255] zero
//   then every parameter in this order, each one array over the layers, as fp32 or bf16:
//     wte (Vp, C)  wpe (maxT, C)  ln1w (L, C)  ln1b (L, C)  qkvw (L, 3C, C)  qkvb (L, 3C)
//     attprojw (L, C, C)  attprojb (L, C)  ln2w (L, C)  ln2b (L, C)  fcw (L, 4C, C)  fcb (L, 4C)
//     fcprojw (L, C, 4C)  fcprojb (L, C)  lnfw (C)  lnfb (C)
// and nothing after them. Each layer's slice of qkvw (3C, C) and qkvb (3C) is our
// h.N.attn.c_attn weight and bias as they are (rows [0, C) q, [C, 2C) k, [2C, 3C) v).
//
// Import converts bf16 to fp32 exactly. A file whose Vp equals V (no padding, e.g. written by
// an older exporter) is padded on import to padded_vocab(V) rows, the new rows zero. Export
// writes fp32 (version 3) by default; bf16 (version 5) rounds to nearest even, as PyTorch's
// .to(torch.bfloat16) does.
//
//   Gpt2Weights w = load_gpt2_llmc("gpt2_124M.bin");
//   save_gpt2_llmc(w.model, "out.bin");                       // fp32, version 3
//   save_gpt2_llmc(w.model, "out_bf16.bin", LlmcDType::BF16);  // version 5
#pragma once

#include <cstdint>
#include <string>

#include "models/gpt2/gpt2_weights.h"

namespace llmcc::models {

inline constexpr std::int32_t kLlmcModelMagic = 20240326;
inline constexpr std::int32_t kLlmcVersionF32 = 3;
inline constexpr std::int32_t kLlmcVersionBF16 = 5;
inline constexpr std::size_t kLlmcHeaderBytes = 256 * sizeof(std::int32_t);

enum class LlmcDType { F32, BF16 };

// True when the file exists and starts with llm.c's model magic (nothing else is checked).
bool is_llmc_model_file(const std::string& path);

// What the header of an llm.c model file says: the model's shape as stored (Vp as in the file)
// and the weight type. Throws llmcc::Error naming the file for a short file, a bad magic, an
// unknown version or a header value out of range.
struct LlmcHeader {
  Gpt2Config config;
  LlmcDType dtype = LlmcDType::F32;
  int version = 0;
};
LlmcHeader read_llmc_header(const std::string& path);

// Loads an llm.c GPT-2 model file (version 3 or 5). Also throws when the file is shorter or
// longer than its header implies (saying the expected and the actual size).
Gpt2Weights load_gpt2_llmc(const std::string& path);

// Writes the model in llm.c's layout, atomically (<path>.tmp, fsync, rename).
void save_gpt2_llmc(const Gpt2& model, const std::string& path, LlmcDType dtype = LlmcDType::F32);

// For error messages: which llm.c file a magic number belongs to ("llm.c's token file: ..."), or
// empty for one llm.c does not use.
std::string llmc_magic_name(std::int32_t magic);

// fp32 <-> bf16 as llm.c and PyTorch do (round to nearest even; NaN stays NaN).
std::uint16_t f32_to_bf16(float x);
float bf16_to_f32(std::uint16_t x);

}  // namespace llmcc::models
