// Qwen3Config: the shape of a Qwen3 model (transformers' Qwen3ForCausalLM) and its named presets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmcc::models {

struct Qwen3Config {
  int vocab_size = 151936;  // rows of embed_tokens (and of the untied head)
  int max_seq_len = 2048;   // longest sequence trained or sampled (RoPE has no table to size)
  int n_layer = 28;
  int n_head = 16;                // query heads
  int n_kv_head = 8;              // key/value heads (grouped-query attention); must divide n_head
  int n_embd = 1024;              // model width (hidden_size)
  int head_dim = 128;             // channels per head, independent of n_embd / n_head
  int hidden_dim = 3072;          // SwiGLU width (intermediate_size)
  float rope_theta = 1000000.0f;  // RoPE base
  float norm_eps = 1e-6f;         // RMSNorm epsilon, also of the per-head q and k norms
  bool tie_embeddings = true;     // the LM head is embed_tokens (no lm_head of its own)

  // Elements of all parameters. Throws llmcc::Error when that is over kMaxParameterCount.
  std::int64_t parameter_count() const;
  // Forward + backward FLOPs of one training step over B x T tokens (6N per token plus attention).
  // Weights that multiply in matrix products per token (2 FLOPs each forward, 4 backward).
  double matmul_weights() const;
  double flops_per_step(int B, int T) const;
  // Throws llmcc::Error naming the field for a value out of range.
  void validate() const;
  // "L28 H16/8 C1024 D128 F3072 T2048 V151936 theta 1e+06 tied"
  std::string str() const;
};

// Named presets. qwen3-tiny (L4 H4/2 C128 D32 F384 T256 V32000, tied) for tests and demos;
// qwen3-0.6b and qwen3-1.7b with the published shapes (tied heads, vocab 151936) and the
// context bounded at 2048 (the real models' is 40960), which only bounds sequences trained or
// sampled. Throws llmcc::Error listing the names for an unknown one.
Qwen3Config qwen3_preset(const std::string& name);
std::vector<std::string> qwen3_preset_names();

}  // namespace llmcc::models
