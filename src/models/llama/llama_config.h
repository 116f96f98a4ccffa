// LlamaConfig: the shape of a Llama model, its named presets and the SwiGLU hidden-size rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llmcc/ops/rope.h"  // RopeScaling, RopeConfig

namespace llmcc::models {

struct LlamaConfig {
  int vocab_size = 32000;  // rows of tok_embeddings and of the untied output head
  int max_seq_len = 2048;  // longest sequence trained or sampled (RoPE has no table to size)
  int n_layer = 32;
  int n_head = 32;              // query heads
  int n_kv_head = 32;           // key/value heads (grouped-query attention); must divide n_head
  int n_embd = 4096;            // model width ("dim"); head size n_embd / n_head
  int hidden_dim = 11008;       // SwiGLU width: w1, w3 (hidden_dim, n_embd), w2 (n_embd, hidden_dim)
  float rope_theta = 10000.0f;  // RoPE base (10000 in Llama 2, 500000 in Llama 3)
  RopeScaling rope_scaling;     // none, or Llama 3.1/3.2's "llama3" frequency scaling
  float norm_eps = 1e-5f;       // RMSNorm epsilon
  bool tie_embeddings = false;  // the LM head is tok_embeddings (no output.weight of its own)

  RopeConfig rope() const { return {rope_theta, rope_scaling}; }

  int head_dim() const { return n_embd / n_head; }
  // Elements of all parameters (an untied output head counted apart from the embedding). Throws
  // llmcc::Error when that is over kMaxParameterCount (nn/gpt2_config.h; validate() names the
  // field first).
  std::int64_t parameter_count() const;
  // Forward + backward FLOPs of one training step over B x T tokens (6N per token plus attention).
  // Weights that multiply in matrix products per token (2 FLOPs each forward, 4 backward).
  double matmul_weights() const;
  double flops_per_step(int B, int T) const;
  // Throws llmcc::Error naming the field for a value out of range (n_embd % n_head, n_head %
  // n_kv_head, an odd head size, which RoPE cannot rotate, a rope scaling out of range, a tensor
  // or the whole model over kMaxParameterCount elements, ...).
  void validate() const;
  // "L6 H6/6 C288 F768 T256 V32000 theta 10000", then " llama3 rope x32 (1, 4, 8192)" when scaled
  // and " tied" when tied
  std::string str() const;
};

// Meta's SwiGLU width: 2/3 of 4 * dim, times ffn_dim_multiplier when given, rounded up to a
// multiple of multiple_of (llama2.c: dim 288 -> 768, dim 512 -> 1376 with multiple_of 32).
int llama_hidden_dim(int dim, int multiple_of, float ffn_dim_multiplier = 1.0f);

// Named presets. For tests and demos: llama-tiny (L4 H4 KV2 C128 F352 T256), llama-mini (L6 H6
// KV2 C384 F1024 T256). llama2.c's TinyStories models: stories15m (L6 H6 C288 F768 T256),
// stories42m (L8 H8 C512 F1376 T1024), stories110m (L12 H12 C768 F2048 T1024). llama-3.2-1b's
// shape (L16 H32 KV8 C2048 F8192 V128256 theta 500000, Llama 3.2's llama3 rope scaling: factor 32,
// low 1, high 4, original context 8192; its head tied to the embedding as Meta's). All have vocab
// 32000 unless stated; all but llama-3.2-1b an untied output head (see llama_config.cpp for what
// that means for the reference counts).
// Throws llmcc::Error listing the names for an unknown one.
LlamaConfig llama_preset(const std::string& name);
std::vector<std::string> llama_preset_names();
bool is_llama_preset(const std::string& name);

}  // namespace llmcc::models
