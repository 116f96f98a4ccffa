// Llama as plain forward code. adgen reads this file and generates its backward
// (generated/llama.grad.{h,cpp}, `llama_loss_grad`); there is no hand-written model backward.
//
// Token embedding (no position embedding: positions enter through RoPE), n_layer pre-norm blocks
// (RMSNorm -> grouped-query causal self-attention with rotary q and k -> output projection, each
// with a residual; RMSNorm -> SwiGLU MLP w2(silu(w1 x) * w3 x), residual), a final RMSNorm and the
// LM head: its own matrix, or tok_embeddings itself (config.tie_embeddings, as Llama 3.2 and
// SmolLM2). No biases anywhere. Names follow Meta's and llama2.c's checkpoints.
#pragma once

#include <cstdint>
#include <string>
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
#include "models/kv_cache.h"
#include "models/llama/llama_config.h"

namespace llmcc::models {

struct LlamaRmsNorm {
  float eps = 1e-5f;
  Tensor w LLMCC_ADGEN_NAME("weight");  // (C)

  Tensor forward(const Tensor& x) const { return llmcc::rmsnorm(x, w, eps); }  // (B, T, C)
};

struct LlamaAttention {
  int n_head = 0;                           // query heads
  int n_kv_head = 0;                        // key/value heads; query head h reads kv head h / (n_head / n_kv_head)
  RopeConfig rope_freqs;                    // RoPE's base theta and frequency scaling (config)
  Tensor wq LLMCC_ADGEN_NAME("wq.weight");  // (n_head * HS, C)
  Tensor wk LLMCC_ADGEN_NAME("wk.weight");  // (n_kv_head * HS, C)
  Tensor wv LLMCC_ADGEN_NAME("wv.weight");  // (n_kv_head * HS, C)
  Tensor wo LLMCC_ADGEN_NAME("wo.weight");  // (C, n_head * HS)

  Tensor forward(const Tensor& x) const {                                           // x: (B, T, C)
    Tensor q = llmcc::rope(llmcc::linear_nobias(x, wq), n_head, rope_freqs, 0);     // (B, T, NH * HS)
    Tensor k = llmcc::rope(llmcc::linear_nobias(x, wk), n_kv_head, rope_freqs, 0);  // (B, T, NKV * HS)
    Tensor v = llmcc::linear_nobias(x, wv);                                         // (B, T, NKV * HS)
    Tensor y = llmcc::attention(q, k, v, n_head, n_kv_head);                        // (B, T, NH * HS)
    return llmcc::linear_nobias(y, wo);                                             // (B, T, C)
  }
  // Generation: x's rows are new positions from cache.pos(); their keys and values go into
  // `layer` of the cache.
  Tensor decode(const Tensor& x, KvCache& cache, int layer) const {                           // x: (1, T, C)
    Tensor q = llmcc::rope(llmcc::linear_nobias(x, wq), n_head, rope_freqs, cache.pos());     // (1, T, NH * HS)
    Tensor k = llmcc::rope(llmcc::linear_nobias(x, wk), n_kv_head, rope_freqs, cache.pos());  // (1, T, NKV * HS)
    Tensor v = llmcc::linear_nobias(x, wv);                                                   // (1, T, NKV * HS)
    return llmcc::linear_nobias(kv_attention(q, k, v, cache, layer, n_head, n_kv_head), wo);  // (1, T, C)
  }
};

struct LlamaFeedForward {
  Tensor w1 LLMCC_ADGEN_NAME("w1.weight");  // (F, C): gate
  Tensor w2 LLMCC_ADGEN_NAME("w2.weight");  // (C, F): down
  Tensor w3 LLMCC_ADGEN_NAME("w3.weight");  // (F, C): up

  Tensor forward(const Tensor& x) const {                                 // x: (B, T, C)
    Tensor gate = llmcc::silu(llmcc::linear_nobias(x, w1));               // (B, T, F)
    return llmcc::linear_nobias(gate * llmcc::linear_nobias(x, w3), w2);  // (B, T, C)
  }
};

struct LlamaBlock {
  LlamaRmsNorm attention_norm;
  LlamaAttention attention;
  LlamaRmsNorm ffn_norm;
  LlamaFeedForward feed_forward;
  Tensor forward(const Tensor& x) const {  // x: (B, T, C)
    Tensor h = x + attention.forward(attention_norm.forward(x));
    return h + feed_forward.forward(ffn_norm.forward(h));
  }
  Tensor decode(const Tensor& x, KvCache& cache, int layer) const {  // x: (1, T, C)
    Tensor h = x + attention.decode(attention_norm.forward(x), cache, layer);
    return h + feed_forward.forward(ffn_norm.forward(h));
  }
};

// The untied LM head.
struct LlamaOutput {
  Tensor w LLMCC_ADGEN_NAME("weight");  // (V, C)
};

// The parameter list (checkpoints, the optimizer, zeroing, counting and the gradient buffer all
// follow it) is generated from the fields: field order, Meta's / llama2.c's names
// ("tok_embeddings.weight", "layers.0.attention_norm.weight", ..., "norm.weight", then the
// untied head's "output.weight"). Call llmcc::for_each_parameter(model, f) from a file that
// includes the generated llama.grad.h (not from this header, which adgen reads).
struct Llama {
  LlamaConfig cfg;
  Tensor tok_embeddings LLMCC_ADGEN_NAME("tok_embeddings.weight");  // (V, C)
  std::vector<LlamaBlock> layers;
  LlamaRmsNorm norm;
  // One head when untied; none when tok_embeddings is the head (its gradient then sums both uses).
  std::vector<LlamaOutput> output LLMCC_ADGEN_OPTIONAL;

  // Declares every parameter's shape (no storage); bind with llmcc::bind_parameters(model).
  explicit Llama(const LlamaConfig& config);
  Llama() = default;

  // Logits. idx: (B, T) with T <= max_seq_len; returns (B, T, V).
  Tensor forward(const Tokens& idx) const {
    Tensor x = llmcc::token_embedding(idx, tok_embeddings);  // (B, T, C)
    for (const LlamaBlock& b : layers) x = b.forward(x);     // (B, T, C)
    Tensor h = norm.forward(x);                              // (B, T, C)
    Tensor logits;                                           // (B, T, V)
    if (cfg.tie_embeddings)
      logits = llmcc::linear_nobias(h, tok_embeddings);
    else
      logits = llmcc::linear_nobias(h, output[0].w);
    return logits;
  }

  // Generation (models/kv_cache.h): the logits (1, 1, V) after the new tokens idx ((1, T), at
  // positions cache.pos()..), each layer keeping their keys and values in the cache. A prefill
  // runs the forward's ops on the prompt; a decode step runs them on one row.
  Tensor decode(const Tokens& idx, KvCache& cache) const {
    const std::int64_t C = cfg.n_embd, T = idx.T();
    Tensor x = llmcc::token_embedding(idx, tok_embeddings);  // (1, T, C)
    for (int l = 0; l < cfg.n_layer; ++l) x = layers[l].decode(cache.carry(x), cache, l);
    x = cache.carry(x);                                                                                  // (1, T, C)
    const Tensor last(x.f32() + (T - 1) * C, {1, 1, C});                                                 // (1, 1, C)
    return llmcc::linear_nobias(norm.forward(last), cfg.tie_embeddings ? tok_embeddings : output[0].w);  // (1, 1, V)
  }
};

// Mean cross-entropy of next-token prediction; targets equal to -1 are ignored.
// idx, targets: (B, T).
LLMCC_ADGEN_ENTRY inline float llama_loss(const Llama& m, const Tokens& idx, const Tokens& targets) {
  return llmcc::cross_entropy(m.forward(idx), targets, m.cfg.vocab_size, -1);
}

// Initialisation as llama2.c's and nanoGPT's: every weight matrix and the embedding N(0, 0.02),
// residual projections (attention.wo, feed_forward.w2) N(0, 0.02 / sqrt(2 L)), RMSNorm weights
// one. Draws from Rng(seed) in parameter list order, so the same seed gives the same model.
void llama_init(Llama& model, std::uint64_t seed);

}  // namespace llmcc::models
