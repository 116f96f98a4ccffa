// rope: rotary position embedding (Meta-Llama convention) applied to queries or keys.
#pragma once

#include <string>

#include "llmcc/tensor.h"

namespace llmcc {

// How RoPE's frequencies are rescaled for long contexts (Hugging Face's config.json
// "rope_scaling": {"rope_type": ...}). Only what Llama needs: none, or Llama 3's ("llama3",
// Llama 3.1 and 3.2), which divides the low frequencies by `factor`, keeps the high ones and
// interpolates smoothly between them.
struct RopeScaling {
  enum class Type { None, Llama3 };
  Type type = Type::None;
  // llama3 only:
  float factor = 1.0f;                          // low frequencies are divided by this (32 in Llama 3.2, 8 in 3.1)
  float low_freq_factor = 1.0f;                 // wavelengths above original / low_freq_factor are fully scaled
  float high_freq_factor = 4.0f;                // wavelengths below original / high_freq_factor are kept
  int original_max_position_embeddings = 8192;  // the context of pre-training

  // "default" (no scaling) or "llama3": Hugging Face's rope_type names.
  const char* type_name() const;
  // The type whose rope_type name is `name` ("default" or "llama3"); throws llmcc::Error naming
  // `where` and the unknown name, and listing the known ones.
  static Type type_from_name(const std::string& name, const std::string& where);
  // Throws llmcc::Error naming `where` and the field out of range (factor >= 1, 0 < low <
  // high, original > 0), for Llama3 only.
  void validate(const std::string& where) const;
  bool operator==(const RopeScaling&) const = default;
};

// RoPE's frequencies: the base and the scaling.
struct RopeConfig {
  float theta = 10000.0f;  // 10000 in Llama 2, 500000 in Llama 3
  RopeScaling scaling;
};

// The inverse frequency (radians per position) of pair i < HS/2: theta^(-2i/HS), then for
// llama3 scaling, with wavelength w = 2 pi / f, L = original_max_position_embeddings:
//   w < L / high_freq_factor:  f (kept)
//   w > L / low_freq_factor:   f / factor
//   otherwise:                 (1 - s) f / factor + s f,  s = (L / w - low) / (high - low)
// (transformers' _compute_llama3_parameters), in double.
double rope_inv_freq(const RopeConfig& cfg, int i, int HS);

// x, out: (B, T, n_head * HS), HS even. Within each head the pairs (x[2i], x[2i+1]),
// i < HS/2, are rotated by the angle p * rope_inv_freq(cfg, i, HS) at position p = pos_offset + t:
//   out[2i]   = x[2i] * cos - x[2i+1] * sin
//   out[2i+1] = x[2i] * sin + x[2i+1] * cos
// cfg is config (theta > 0); pos_offset >= 0 is the position of t = 0 (the number of tokens
// already in a KV cache when generating).
Tensor rope(const Tensor& x, int n_head, const RopeConfig& cfg, int pos_offset);

// d_x += the inverse rotation of d_out (rope is orthogonal and linear in x); a null d_x is
// skipped. `out` is not read.
void rope_pullback(const Tensor& x, int n_head, const RopeConfig& cfg, int pos_offset, const Tensor& out,
                   const Tensor& d_out, Tensor* d_x);

// Plain RoPE with base theta (no scaling): rope(x, n_head, RopeConfig{theta}, pos_offset).
Tensor rope(const Tensor& x, int n_head, float theta, int pos_offset);
void rope_pullback(const Tensor& x, int n_head, float theta, int pos_offset, const Tensor& out, const Tensor& d_out,
                   Tensor* d_x);

}  // namespace llmcc
