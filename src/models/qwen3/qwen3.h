// Qwen3 (transformers' Qwen3ForCausalLM) as plain forward code; adgen writes its backward
// (generated/qwen3.grad.*). Pre-norm blocks as Llama's, with:
//   - an RMSNorm over each head's head_dim channels of q and of k (q_norm, k_norm), before RoPE;
//   - head_dim independent of n_embd / n_head (q_proj is (n_head * head_dim, n_embd));
//   - grouped-query attention, SwiGLU MLP, no biases;
//   - the LM head tied to embed_tokens or a separate lm_head (config.tie_embeddings).
// RoPE rotates interleaved channel pairs (as every llmcc model); the Hugging Face import and
// export (qwen3_hf.h) permute q_proj/k_proj rows and the q/k norm gains to and from
// transformers' half-split order, which computes the same attention.
#pragma once

#include <cstdint>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/mul.h"
#include "llmcc/ops/rmsnorm.h"
#include "llmcc/ops/rope.h"
#include "llmcc/ops/silu.h"
#include "llmcc/ops/view.h"
#include "models/kv_cache.h"
#include "models/qwen3/qwen3_config.h"

namespace llmcc::models {

struct Qwen3RmsNorm {
  float eps = 1e-6f;
  Tensor w LLMCC_ADGEN_NAME("weight");  // (C), or (D) for a per-head norm

  Tensor forward(const Tensor& x) const { return llmcc::rmsnorm(x, w, eps); }  // (B, T, C)
  // Each head's D channels of x ((B, T, H * D)) normalised on their own; same shape.
  Tensor forward_heads(const Tensor& x, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D) const {
    Tensor rows = llmcc::view(x, Shape{B * T * H, D}, 0);                     // (B*T*H, D)
    return llmcc::view(llmcc::rmsnorm(rows, w, eps), Shape{B, T, H * D}, 0);  // (B, T, H * D)
  }
};

struct Qwen3Attention {
  int n_head = 0;     // query heads
  int n_kv_head = 0;  // key/value heads; query head h reads kv head h / (n_head / n_kv_head)
  int head_dim = 0;   // D
  RopeConfig rope_freqs;
  Tensor q_proj LLMCC_ADGEN_NAME("q_proj.weight");  // (NH * D, C)
  Tensor k_proj LLMCC_ADGEN_NAME("k_proj.weight");  // (NKV * D, C)
  Tensor v_proj LLMCC_ADGEN_NAME("v_proj.weight");  // (NKV * D, C)
  Tensor o_proj LLMCC_ADGEN_NAME("o_proj.weight");  // (C, NH * D)
  Qwen3RmsNorm q_norm;                              // (D)
  Qwen3RmsNorm k_norm;                              // (D)

  Tensor forward(const Tensor& x, std::int64_t B, std::int64_t T) const {                         // x: (B, T, C)
    Tensor q = q_norm.forward_heads(llmcc::linear_nobias(x, q_proj), B, T, n_head, head_dim);     // (B, T, NH * D)
    Tensor k = k_norm.forward_heads(llmcc::linear_nobias(x, k_proj), B, T, n_kv_head, head_dim);  // (B, T, NKV * D)
    Tensor v = llmcc::linear_nobias(x, v_proj);                                                   // (B, T, NKV * D)
    Tensor y = llmcc::attention(llmcc::rope(q, n_head, rope_freqs, 0), llmcc::rope(k, n_kv_head, rope_freqs, 0), v,
                                n_head, n_kv_head);  // (B, T, NH * D)
    return llmcc::linear_nobias(y, o_proj);          // (B, T, C)
  }
  // Generation: x's rows are new positions from cache.pos(); their keys and values go into
  // `layer` of the cache.
  Tensor decode(const Tensor& x, KvCache& cache, int layer) const {  // x: (1, T, C)
    const std::int64_t T = x.shape()[1];
    Tensor q = q_norm.forward_heads(llmcc::linear_nobias(x, q_proj), 1, T, n_head, head_dim);     // (1, T, NH * D)
    Tensor k = k_norm.forward_heads(llmcc::linear_nobias(x, k_proj), 1, T, n_kv_head, head_dim);  // (1, T, NKV * D)
    Tensor v = llmcc::linear_nobias(x, v_proj);                                                   // (1, T, NKV * D)
    Tensor y = kv_attention(llmcc::rope(q, n_head, rope_freqs, cache.pos()),
                            llmcc::rope(k, n_kv_head, rope_freqs, cache.pos()), v, cache, layer, n_head, n_kv_head);
    return llmcc::linear_nobias(y, o_proj);  // (1, T, C)
  }
};

struct Qwen3Mlp {
  Tensor gate_proj LLMCC_ADGEN_NAME("gate_proj.weight");  // (F, C)
  Tensor up_proj LLMCC_ADGEN_NAME("up_proj.weight");      // (F, C)
  Tensor down_proj LLMCC_ADGEN_NAME("down_proj.weight");  // (C, F)

  Tensor forward(const Tensor& x) const {                                             // x: (B, T, C)
    Tensor gate = llmcc::silu(llmcc::linear_nobias(x, gate_proj));                    // (B, T, F)
    return llmcc::linear_nobias(gate * llmcc::linear_nobias(x, up_proj), down_proj);  // (B, T, C)
  }
};

struct Qwen3Block {
  Qwen3RmsNorm input_layernorm;
  Qwen3Attention self_attn;
  Qwen3RmsNorm post_attention_layernorm;
  Qwen3Mlp mlp;
  Tensor forward(const Tensor& x, std::int64_t B, std::int64_t T) const {  // x: (B, T, C)
    Tensor h = x + self_attn.forward(input_layernorm.forward(x), B, T);
    return h + mlp.forward(post_attention_layernorm.forward(h));
  }
  Tensor decode(const Tensor& x, KvCache& cache, int layer) const {  // x: (1, T, C)
    Tensor h = x + self_attn.decode(input_layernorm.forward(x), cache, layer);
    return h + mlp.forward(post_attention_layernorm.forward(h));
  }
};

// The decoder stack, a field of Qwen3 so that parameter names start "model." as transformers'.
struct Qwen3Body {
  Tensor embed_tokens LLMCC_ADGEN_NAME("embed_tokens.weight");  // (V, C)
  std::vector<Qwen3Block> layers;
  Qwen3RmsNorm norm;
};

struct Qwen3LmHead {
  Tensor w LLMCC_ADGEN_NAME("weight");  // (V, C)
};

// The parameter list is generated from the fields: transformers' names
// ("model.embed_tokens.weight", "model.layers.0.self_attn.q_norm.weight", ..., "model.norm.weight"),
// then the untied head as "lm_head.0.weight". Call llmcc::for_each_parameter(model, f) from a
// file that includes the generated qwen3.grad.h.
struct Qwen3 {
  Qwen3Config cfg;
  Qwen3Body model;
  std::vector<Qwen3LmHead> lm_head;  // one head when untied; none when the embedding is the head

  // Declares every parameter's shape (no storage); bind with llmcc::bind_parameters(model).
  explicit Qwen3(const Qwen3Config& config);
  Qwen3() = default;

  // Logits. idx: (B, T) with T <= max_seq_len; returns (B, T, V).
  Tensor forward(const Tokens& idx) const {
    const std::int64_t B = idx.B(), T = idx.T();
    Tensor x = llmcc::token_embedding(idx, model.embed_tokens);       // (B, T, C)
    for (const Qwen3Block& b : model.layers) x = b.forward(x, B, T);  // (B, T, C)
    Tensor h = model.norm.forward(x);                                 // (B, T, C)
    Tensor logits;                                                    // (B, T, V)
    if (cfg.tie_embeddings)
      logits = llmcc::linear_nobias(h, model.embed_tokens);
    else
      logits = llmcc::linear_nobias(h, lm_head[0].w);
    return logits;
  }

  // Generation (models/kv_cache.h): the logits (1, 1, V) after the new tokens idx ((1, T), at
  // positions cache.pos()..), each layer keeping their keys and values in the cache.
  Tensor decode(const Tokens& idx, KvCache& cache) const {
    const std::int64_t C = cfg.n_embd, T = idx.T();
    Tensor x = llmcc::token_embedding(idx, model.embed_tokens);  // (1, T, C)
    for (int l = 0; l < cfg.n_layer; ++l) x = model.layers[l].decode(cache.carry(x), cache, l);
    x = cache.carry(x);                                   // (1, T, C)
    const Tensor last(x.f32() + (T - 1) * C, {1, 1, C});  // (1, 1, C)
    return llmcc::linear_nobias(model.norm.forward(last), cfg.tie_embeddings ? model.embed_tokens : lm_head[0].w);
  }
};

// Mean cross-entropy of next-token prediction; targets equal to -1 are ignored.
// idx, targets: (B, T).
LLMCC_ADGEN_ENTRY inline float qwen3_loss(const Qwen3& m, const Tokens& idx, const Tokens& targets) {
  return llmcc::cross_entropy(m.forward(idx), targets, m.cfg.vocab_size, -1);
}

// Initialisation as Llama's: every weight matrix and the embedding N(0, 0.02), residual
// projections (o_proj, down_proj) N(0, 0.02 / sqrt(2 L)), RMSNorm gains (q and k norms too) one.
// Draws from Rng(seed) in parameter list order, so the same seed gives the same model.
void qwen3_init(Qwen3& model, std::uint64_t seed);

}  // namespace llmcc::models
