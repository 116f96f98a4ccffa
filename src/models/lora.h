// LoRA (Hu et al., 2021): a frozen linear map x W^T gets a trainable low-rank update,
//
//   y = x W^T + (alpha / r) (x A^T) B^T,    W (out, in), A (r, in), B (out, r),
//
// with B zero at the start, so the adapted model starts as the base model. A family's model takes
// an adapter set (at most one adapter per linear map of each block, of the type LLMCC_LORA_ADAPTER declares) in its
// forward; its LoRA entry differentiates with respect to the adapters only, with the base model an argument adgen gives
// no adjoint: the backward forms the input gradients through the frozen maps and the adapters' own gradients, and no
// weight gradient of the base at all.
//
// Names follow PEFT's (lora_A.weight, lora_B.weight), under the name of the map they adapt.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/lora_linear.h"
#include "llmcc/ops/scale.h"
#include "llmcc/tensor.h"
#include "llmcc/train/rng.h"

namespace llmcc::models {

// A family's adapter module is a struct of its own with the fields and forward below (adgen
// writes the backward of the modules a model header uses into that header's generated files, so
// one type shared by two families would have its generated functions defined twice):
//
//   struct LlamaLoraAdapter {
//     float scale = 1.0f;                          // alpha / r
//     LoraDropout dropout;                         // p 0 but in training steps (LoraModel)
//     Tensor a LLMCC_ADGEN_NAME("lora_A.weight");  // (r, in)
//     Tensor b LLMCC_ADGEN_NAME("lora_B.weight");  // (out, r)
//     // The adapted map of x (..., in) with the frozen w (out, in): x w^T + scale (x A^T) B^T,
//     // one op (llmcc/ops/lora_linear.h), the update added into the base product.
//     Tensor forward(const Tensor& x, const Tensor& w) const {
//       return llmcc::lora_linear(x, w, a, b, scale, dropout);
//     }
//   };

// Which maps get an adapter, its rank and alpha, and the dropout on its input in training.
struct LoraConfig {
  int rank = 8;
  float alpha = 16.0f;
  std::vector<std::string> targets;  // the family's short names of the maps ("q", "k", "v", "o", ...)
  float dropout = 0.0f;              // PEFT's lora_dropout: p of each adapter input's mask

  float scale() const { return alpha / static_cast<float>(rank); }
  bool targets_map(const std::string& name) const;
};

// The targets of a comma-separated list ("q, v,down"), each trimmed of spaces. Throws
// llmcc::Error naming `where` and the list when an item is empty.
std::vector<std::string> lora_targets_from(const std::string& list, const std::string& where);

// The weights LoRA adapters were trained on: the path they were loaded from and a CRC-32 of
// their parameters' bytes (in parameter list order), which must match wherever the adapters are
// applied again.
struct LoraBase {
  std::string path;
  std::uint32_t crc32 = 0;
};
struct LoraInfo {
  LoraConfig cfg;
  LoraBase base;
};

// Throws llmcc::Error unless cfg.rank >= 1, cfg.alpha is a positive number, cfg.dropout is in
// [0, 1) and every target is one of `known` (the family's names, listed in the message), none
// twice and at least one.
void lora_check(const LoraConfig& cfg, const std::vector<std::string>& known);

// The dropout of adapter number `adapter` (parameter list order) in the forward of draw `draw`
// (one per training micro-batch; TrainerHooks::training): its own mask per adapter and draw.
LoraDropout lora_dropout(float p, std::uint64_t draw, std::uint64_t adapter);

// An adapter of rank cfg.rank for a map with `in` inputs and `out` outputs, its tensors declared
// (no storage; bind with llmcc::bind_parameters).
template <class Adapter>
Adapter lora_adapter(const LoraConfig& cfg, std::int64_t in, std::int64_t out) {
  Adapter adapter;
  adapter.scale = cfg.scale();
  adapter.a = Tensor(nullptr, Shape{cfg.rank, in});
  adapter.b = Tensor(nullptr, Shape{out, cfg.rank});
  return adapter;
}

// Frozen matrices stored in bf16, rounded once (bf16's rule, kernels/cpu/bf16.h), in one buffer:
// what a LoRA model's base keeps with --base-dtype bf16.
class Bf16Matrices {
 public:
  // Rounds each of `matrices` (f32, bound) into the buffer and rebinds it there as bf16. Throws
  // llmcc::Error when the memory cannot be had or matrices are stored already.
  void store(const std::vector<Tensor*>& matrices);
  // Widens the values of the k-th stored matrix into `to` (f32, its shape).
  void widen_into(std::size_t k, const Tensor& to) const;
  bool empty() const { return offsets_.empty(); }

 private:
  std::unique_ptr<std::uint16_t, void (*)(void*)> data_{nullptr, &std::free};
  std::vector<std::size_t> offsets_, sizes_;  // per matrix, in elements
};

// PEFT's initialisation of bound tensors: A (r, in) uniform in +-1/sqrt(in) (kaiming_uniform
// with a = sqrt(5)), B zero.
void lora_init(const Tensor& a, const Tensor& b, Rng& rng);

// w (out, in) += scale * B A: the adapted map as one matrix (the merged model computes what the
// adapter model does, up to rounding). Throws llmcc::Error when the shapes do not fit.
void lora_merge(const Tensor& w, const Tensor& a, const Tensor& b, float scale);

}  // namespace llmcc::models
