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
#include "llmcc/ops/lora_linear.h"
#include "llmcc/ops/mul.h"
#include "llmcc/ops/rmsnorm.h"
#include "llmcc/ops/rope.h"
#include "llmcc/ops/scale.h"
#include "llmcc/ops/swiglu.h"
#include "models/kv_cache.h"
#include "models/llama/llama_config.h"
#include "models/lora.h"

namespace llmcc::models {

struct LlamaRmsNorm {
  float eps = 1e-5f;
  Tensor w LLMCC_ADGEN_NAME("weight");  // (C)

  Tensor forward(const Tensor& x) const { return llmcc::rmsnorm(x, w, eps); }  // (B, T, C)
};

// A LoRA adapter (models/lora.h): the update (alpha / r) (x A^T) B^T of one linear map.
struct LlamaLoraAdapter {
  float scale = 1.0f;                          // alpha / r
  LoraDropout dropout;                         // on the update's input: p 0 but in training steps
  Tensor a LLMCC_ADGEN_NAME("lora_A.weight");  // (r, in)
  Tensor b LLMCC_ADGEN_NAME("lora_B.weight");  // (out, r)

  // The adapted map of x (..., in) with the frozen weight w (out, in): x w^T + scale (x A^T) B^T,
  // (..., out), the update added into the base product (llmcc/ops/lora_linear.h).
  Tensor forward(const Tensor& x, const Tensor& w) const { return llmcc::lora_linear(x, w, a, b, scale, dropout); }
};

// LoRA adapters of one block: at most one per linear map, named as the map.
struct LlamaBlockLora {
  std::vector<LlamaLoraAdapter> wq LLMCC_ADGEN_OPTIONAL;
  std::vector<LlamaLoraAdapter> wk LLMCC_ADGEN_OPTIONAL;
  std::vector<LlamaLoraAdapter> wv LLMCC_ADGEN_OPTIONAL;
  std::vector<LlamaLoraAdapter> wo LLMCC_ADGEN_OPTIONAL;
  std::vector<LlamaLoraAdapter> w1 LLMCC_ADGEN_OPTIONAL;
  std::vector<LlamaLoraAdapter> w2 LLMCC_ADGEN_OPTIONAL;
  std::vector<LlamaLoraAdapter> w3 LLMCC_ADGEN_OPTIONAL;

  // x w^T for x (..., in) and the map's frozen weight w (out, in), through the map's adapter when
  // it has one (adgen reads no function of a std::vector argument, so each map has its own).
  Tensor apply_wq(const Tensor& x, const Tensor& w) const {
    if (wq.empty())
      return llmcc::linear_nobias(x, w);
    else
      return wq[0].forward(x, w);
  }
  Tensor apply_wk(const Tensor& x, const Tensor& w) const {
    if (wk.empty())
      return llmcc::linear_nobias(x, w);
    else
      return wk[0].forward(x, w);
  }
  Tensor apply_wv(const Tensor& x, const Tensor& w) const {
    if (wv.empty())
      return llmcc::linear_nobias(x, w);
    else
      return wv[0].forward(x, w);
  }
  Tensor apply_wo(const Tensor& x, const Tensor& w) const {
    if (wo.empty())
      return llmcc::linear_nobias(x, w);
    else
      return wo[0].forward(x, w);
  }
  Tensor apply_w1(const Tensor& x, const Tensor& w) const {
    if (w1.empty())
      return llmcc::linear_nobias(x, w);
    else
      return w1[0].forward(x, w);
  }
  Tensor apply_w2(const Tensor& x, const Tensor& w) const {
    if (w2.empty())
      return llmcc::linear_nobias(x, w);
    else
      return w2[0].forward(x, w);
  }
  Tensor apply_w3(const Tensor& x, const Tensor& w) const {
    if (w3.empty())
      return llmcc::linear_nobias(x, w);
    else
      return w3[0].forward(x, w);
  }
};

// A model's adapters: one LlamaBlockLora per layer ("layers.0.wq.lora_A.weight", ...).
struct LlamaLora {
  std::vector<LlamaBlockLora> layers;
};

struct LlamaAttention {
  int n_head = 0;                           // query heads
  int n_kv_head = 0;                        // key/value heads; query head h reads kv head h / (n_head / n_kv_head)
  RopeConfig rope_freqs;                    // RoPE's base theta and frequency scaling (config)
  Tensor wq LLMCC_ADGEN_NAME("wq.weight");  // (n_head * HS, C)
  Tensor wk LLMCC_ADGEN_NAME("wk.weight");  // (n_kv_head * HS, C)
  Tensor wv LLMCC_ADGEN_NAME("wv.weight");  // (n_kv_head * HS, C)
  Tensor wo LLMCC_ADGEN_NAME("wo.weight");  // (C, n_head * HS)

  // lora: this block's adapters (an empty set leaves the maps as they are).
  Tensor forward(const Tensor& x, const LlamaBlockLora& lora) const {  // x: (B, T, C)
    Tensor q = lora.apply_wq(x, wq);                                   // (B, T, NH * HS)
    Tensor k = lora.apply_wk(x, wk);                                   // (B, T, NKV * HS)
    Tensor v = lora.apply_wv(x, wv);                                   // (B, T, NKV * HS)
    q = llmcc::rope(q, n_head, rope_freqs, 0);
    k = llmcc::rope(k, n_kv_head, rope_freqs, 0);
    Tensor y = llmcc::attention(q, k, v, n_head, n_kv_head);  // (B, T, NH * HS)
    Tensor out = lora.apply_wo(y, wo);                        // (B, T, C)
    return out;
  }
  // Generation: x's rows are new positions from cache.pos(); their keys and values go into
  // `layer` of the cache.
  Tensor decode(const Tensor& x, KvCache& cache, int layer, const LlamaBlockLora& lora) const {  // x: (1, T, C)
    Tensor q = lora.apply_wq(x, wq);                                                             // (1, T, NH * HS)
    Tensor k = lora.apply_wk(x, wk);                                                             // (1, T, NKV * HS)
    Tensor v = lora.apply_wv(x, wv);                                                             // (1, T, NKV * HS)
    q = llmcc::rope(q, n_head, rope_freqs, cache.pos());
    k = llmcc::rope(k, n_kv_head, rope_freqs, cache.pos());
    Tensor y = kv_attention(q, k, v, cache, layer, n_head, n_kv_head);  // (1, T, NH * HS)
    Tensor out = lora.apply_wo(y, wo);                                  // (1, T, C)
    return out;
  }
};

struct LlamaFeedForward {
  Tensor w1 LLMCC_ADGEN_NAME("w1.weight");  // (F, C): gate
  Tensor w2 LLMCC_ADGEN_NAME("w2.weight");  // (C, F): down
  Tensor w3 LLMCC_ADGEN_NAME("w3.weight");  // (F, C): up

  Tensor forward(const Tensor& x, const LlamaBlockLora& lora) const {  // x: (B, T, C)
    Tensor g = lora.apply_w1(x, w1);                                   // (B, T, F)
    Tensor up = lora.apply_w3(x, w3);                                  // (B, T, F)
    Tensor h = llmcc::swiglu(g, up);                                   // (B, T, F): silu(g) * up
    Tensor out = lora.apply_w2(h, w2);                                 // (B, T, C)
    return out;
  }
};

struct LlamaBlock {
  LlamaRmsNorm attention_norm;
  LlamaAttention attention;
  LlamaRmsNorm ffn_norm;
  LlamaFeedForward feed_forward;
  Tensor forward(const Tensor& x, const LlamaBlockLora& lora) const {  // x: (B, T, C)
    Tensor h = x + attention.forward(attention_norm.forward(x), lora);
    return h + feed_forward.forward(ffn_norm.forward(h), lora);
  }
  Tensor decode(const Tensor& x, KvCache& cache, int layer, const LlamaBlockLora& lora) const {  // x: (1, T, C)
    Tensor h = x + attention.decode(attention_norm.forward(x), cache, layer, lora);
    return h + feed_forward.forward(ffn_norm.forward(h), lora);
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
  // n_layer empty adapter sets: what forward and decode use for the model alone.
  LlamaLora no_adapters;
  // A run option, not part of the model: the gradient saves each block's input only and runs the
  // block's forward again in the backward (adgen's checkpoint): the step's activations shrink to
  // one block's, for one more forward of the blocks.
  bool checkpoint_blocks = false;

  // Declares every parameter's shape (no storage); bind with llmcc::bind_parameters(model).
  explicit Llama(const LlamaConfig& config);
  Llama() = default;

  // Logits. idx: (B, T) with T <= max_seq_len; returns (B, T, V). lora: adapters with
  // lora.layers[l] for layer l.
  //
  // Both loops run over layers.size(): adgen then knows each iteration's block is its own, and the
  // backward reports each block's gradients final as soon as its iteration is done (data-parallel
  // training reduces them while the blocks below run). The model alone has a loop of its own:
  // forward(idx, no_adapters) would hand the blocks' backward both the model and a part of it, and
  // adgen then reports the model's gradients only at the end (so would a method for the shared
  // head, which takes the whole model).
  Tensor forward(const Tokens& idx) const {
    Tensor x = llmcc::token_embedding(idx, tok_embeddings);  // (B, T, C)
    for (std::size_t l = 0; l < layers.size(); ++l) {
      if (checkpoint_blocks)
        x = llmcc::adgen::checkpoint(layers[l].forward(x, no_adapters.layers[l]));  // (B, T, C)
      else
        x = layers[l].forward(x, no_adapters.layers[l]);  // (B, T, C)
    }
    Tensor h = norm.forward(x);  // (B, T, C)
    Tensor logits;               // (B, T, V)
    if (cfg.tie_embeddings)
      logits = llmcc::linear_nobias(h, tok_embeddings);
    else
      logits = llmcc::linear_nobias(h, output[0].w);
    return logits;
  }
  Tensor forward(const Tokens& idx, const LlamaLora& lora) const {
    Tensor x = llmcc::token_embedding(idx, tok_embeddings);  // (B, T, C)
    for (std::size_t l = 0; l < layers.size(); ++l) {
      if (checkpoint_blocks)
        x = llmcc::adgen::checkpoint(layers[l].forward(x, lora.layers[l]));  // (B, T, C)
      else
        x = layers[l].forward(x, lora.layers[l]);  // (B, T, C)
    }
    Tensor h = norm.forward(x);  // (B, T, C)
    Tensor logits;               // (B, T, V)
    if (cfg.tie_embeddings)
      logits = llmcc::linear_nobias(h, tok_embeddings);
    else
      logits = llmcc::linear_nobias(h, output[0].w);
    return logits;
  }

  // Generation (models/kv_cache.h): the logits (1, 1, V) after the new tokens idx ((1, T), at
  // positions cache.pos()..), each layer keeping their keys and values in the cache. A prefill
  // runs the forward's ops on the prompt; a decode step runs them on one row.
  Tensor decode(const Tokens& idx, KvCache& cache) const { return decode(idx, cache, no_adapters); }
  Tensor decode(const Tokens& idx, KvCache& cache, const LlamaLora& lora) const {
    const std::int64_t C = cfg.n_embd, T = idx.T();
    Tensor x = llmcc::token_embedding(idx, tok_embeddings);  // (1, T, C)
    for (int l = 0; l < cfg.n_layer; ++l) x = layers[l].decode(cache.carry(x), cache, l, lora.layers[l]);
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

// The same loss of `base` with adapters, differentiated with respect to the adapters only: base
// gets no adjoint, so the backward computes no weight gradient of it.
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("lora") inline float llama_lora_loss(const LlamaLora& lora, const Llama& base,
                                                                       const Tokens& idx, const Tokens& targets) {
  return llmcc::cross_entropy(base.forward(idx, lora), targets, base.cfg.vocab_size, -1);
}

// Adapters for `base` (declared, no storage; bind with llmcc::bind_parameters): one on each map
// cfg.targets names in every layer, by the short names q, k, v, o (attention) and gate, up, down
// (w1, w3, w2). An unknown name, a rank below 1 or an alpha that is not a positive number throws
// llmcc::Error naming it.
LlamaLora llama_lora(const Llama& base, const LoraConfig& cfg);
// The short names llama_lora takes, in the order of the maps in a block.
const std::vector<std::string>& llama_lora_targets();
// Every adapter's PEFT initialisation (lora_init), in parameter list order from Rng(seed).
// Every adapter, in parameter list order.
std::vector<LlamaLoraAdapter*> llama_lora_adapters(LlamaLora& lora);
void llama_lora_init(LlamaLora& lora, std::uint64_t seed);
// Adds every adapter's update into the matrix it adapts (lora_merge): base then computes alone
// what base with lora did.
void llama_lora_merge(Llama& base, const LlamaLora& lora);

// Initialisation as llama2.c's and nanoGPT's: every weight matrix and the embedding N(0, 0.02),
// residual projections (attention.wo, feed_forward.w2) N(0, 0.02 / sqrt(2 L)), RMSNorm weights
// one. Draws from Rng(seed) in parameter list order, so the same seed gives the same model.
void llama_init(Llama& model, std::uint64_t seed);

}  // namespace llmcc::models
