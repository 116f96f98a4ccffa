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
#include "llmcc/ops/lora_linear.h"
#include "llmcc/ops/mul.h"
#include "llmcc/ops/rmsnorm.h"
#include "llmcc/ops/rope.h"
#include "llmcc/ops/scale.h"
#include "llmcc/ops/swiglu.h"
#include "llmcc/ops/view.h"
#include "models/kv_cache.h"
#include "models/qwen3/qwen3_config.h"
#include "models/lora.h"

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

// A LoRA adapter (models/lora.h): the update (alpha / r) (x A^T) B^T of one linear map.
struct Qwen3LoraAdapter {
  float scale = 1.0f;                          // alpha / r
  LoraDropout dropout;                         // on the update's input: p 0 but in training steps
  Tensor a LLMCC_ADGEN_NAME("lora_A.weight");  // (r, in)
  Tensor b LLMCC_ADGEN_NAME("lora_B.weight");  // (out, r)

  // The adapted map of x (..., in) with the frozen weight w (out, in): x w^T + scale (x A^T) B^T,
  // (..., out), the update added into the base product (llmcc/ops/lora_linear.h).
  Tensor forward(const Tensor& x, const Tensor& w) const { return llmcc::lora_linear(x, w, a, b, scale, dropout); }
};

// LoRA adapters of one block: at most one per linear map, named as the map.
struct Qwen3BlockLora {
  std::vector<Qwen3LoraAdapter> q_proj LLMCC_ADGEN_OPTIONAL;
  std::vector<Qwen3LoraAdapter> k_proj LLMCC_ADGEN_OPTIONAL;
  std::vector<Qwen3LoraAdapter> v_proj LLMCC_ADGEN_OPTIONAL;
  std::vector<Qwen3LoraAdapter> o_proj LLMCC_ADGEN_OPTIONAL;
  std::vector<Qwen3LoraAdapter> gate_proj LLMCC_ADGEN_OPTIONAL;
  std::vector<Qwen3LoraAdapter> up_proj LLMCC_ADGEN_OPTIONAL;
  std::vector<Qwen3LoraAdapter> down_proj LLMCC_ADGEN_OPTIONAL;

  // x w^T for x (..., in) and the map's frozen weight w (out, in), through the map's adapter when
  // it has one (adgen reads no function of a std::vector argument, so each map has its own).
  Tensor apply_q_proj(const Tensor& x, const Tensor& w) const {
    if (q_proj.empty())
      return llmcc::linear_nobias(x, w);
    else
      return q_proj[0].forward(x, w);
  }
  Tensor apply_k_proj(const Tensor& x, const Tensor& w) const {
    if (k_proj.empty())
      return llmcc::linear_nobias(x, w);
    else
      return k_proj[0].forward(x, w);
  }
  Tensor apply_v_proj(const Tensor& x, const Tensor& w) const {
    if (v_proj.empty())
      return llmcc::linear_nobias(x, w);
    else
      return v_proj[0].forward(x, w);
  }
  Tensor apply_o_proj(const Tensor& x, const Tensor& w) const {
    if (o_proj.empty())
      return llmcc::linear_nobias(x, w);
    else
      return o_proj[0].forward(x, w);
  }
  Tensor apply_gate_proj(const Tensor& x, const Tensor& w) const {
    if (gate_proj.empty())
      return llmcc::linear_nobias(x, w);
    else
      return gate_proj[0].forward(x, w);
  }
  Tensor apply_up_proj(const Tensor& x, const Tensor& w) const {
    if (up_proj.empty())
      return llmcc::linear_nobias(x, w);
    else
      return up_proj[0].forward(x, w);
  }
  Tensor apply_down_proj(const Tensor& x, const Tensor& w) const {
    if (down_proj.empty())
      return llmcc::linear_nobias(x, w);
    else
      return down_proj[0].forward(x, w);
  }
};

// A model's adapters: one Qwen3BlockLora per layer ("layers.0.q_proj.lora_A.weight", ...).
struct Qwen3Lora {
  std::vector<Qwen3BlockLora> layers;
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

  // lora: this block's adapters (an empty set leaves the maps as they are).
  Tensor forward(const Tensor& x, std::int64_t B, std::int64_t T, const Qwen3BlockLora& lora) const {  // x: (B, T, C)
    Tensor q = lora.apply_q_proj(x, q_proj);                                                           // (B, T, NH * D)
    Tensor k = lora.apply_k_proj(x, k_proj);  // (B, T, NKV * D)
    Tensor v = lora.apply_v_proj(x, v_proj);  // (B, T, NKV * D)
    q = q_norm.forward_heads(q, B, T, n_head, head_dim);
    k = k_norm.forward_heads(k, B, T, n_kv_head, head_dim);
    Tensor y = llmcc::attention(llmcc::rope(q, n_head, rope_freqs, 0), llmcc::rope(k, n_kv_head, rope_freqs, 0), v,
                                n_head, n_kv_head);  // (B, T, NH * D)
    Tensor out = lora.apply_o_proj(y, o_proj);       // (B, T, C)
    return out;
  }
  // Generation: x's rows are new positions from cache.pos(); their keys and values go into
  // `layer` of the cache.
  Tensor decode(const Tensor& x, KvCache& cache, int layer, const Qwen3BlockLora& lora) const {  // x: (1, T, C)
    const std::int64_t T = x.shape()[1];
    Tensor q = lora.apply_q_proj(x, q_proj);  // (1, T, NH * D)
    Tensor k = lora.apply_k_proj(x, k_proj);  // (1, T, NKV * D)
    Tensor v = lora.apply_v_proj(x, v_proj);  // (1, T, NKV * D)
    q = q_norm.forward_heads(q, 1, T, n_head, head_dim);
    k = k_norm.forward_heads(k, 1, T, n_kv_head, head_dim);
    Tensor y = kv_attention(llmcc::rope(q, n_head, rope_freqs, cache.pos()),
                            llmcc::rope(k, n_kv_head, rope_freqs, cache.pos()), v, cache, layer, n_head, n_kv_head);
    Tensor out = lora.apply_o_proj(y, o_proj);  // (1, T, C)
    return out;
  }
};

struct Qwen3Mlp {
  Tensor gate_proj LLMCC_ADGEN_NAME("gate_proj.weight");  // (F, C)
  Tensor up_proj LLMCC_ADGEN_NAME("up_proj.weight");      // (F, C)
  Tensor down_proj LLMCC_ADGEN_NAME("down_proj.weight");  // (C, F)

  Tensor forward(const Tensor& x, const Qwen3BlockLora& lora) const {  // x: (B, T, C)
    Tensor g = lora.apply_gate_proj(x, gate_proj);                     // (B, T, F)
    Tensor up = lora.apply_up_proj(x, up_proj);                        // (B, T, F)
    Tensor h = llmcc::swiglu(g, up);                                   // (B, T, F): silu(g) * up
    Tensor out = lora.apply_down_proj(h, down_proj);                   // (B, T, C)
    return out;
  }
};

struct Qwen3Block {
  Qwen3RmsNorm input_layernorm;
  Qwen3Attention self_attn;
  Qwen3RmsNorm post_attention_layernorm;
  Qwen3Mlp mlp;
  Tensor forward(const Tensor& x, std::int64_t B, std::int64_t T, const Qwen3BlockLora& lora) const {  // x: (B, T, C)
    Tensor h = x + self_attn.forward(input_layernorm.forward(x), B, T, lora);
    return h + mlp.forward(post_attention_layernorm.forward(h), lora);
  }
  Tensor decode(const Tensor& x, KvCache& cache, int layer, const Qwen3BlockLora& lora) const {  // x: (1, T, C)
    Tensor h = x + self_attn.decode(input_layernorm.forward(x), cache, layer, lora);
    return h + mlp.forward(post_attention_layernorm.forward(h), lora);
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
  // n_layer empty adapter sets: what forward and decode use for the model alone.
  Qwen3Lora no_adapters;
  // A run option, not part of the model: the gradient saves each block's input only and runs the
  // block's forward again in the backward (adgen's checkpoint).
  bool checkpoint_blocks = false;

  // Declares every parameter's shape (no storage); bind with llmcc::bind_parameters(model).
  explicit Qwen3(const Qwen3Config& config);
  Qwen3() = default;

  // Logits. idx: (B, T) with T <= max_seq_len; returns (B, T, V). lora: adapters with
  // lora.layers[l] for layer l.
  //
  // Both loops run over model.layers.size(): adgen then knows each iteration's block is its own,
  // and the backward reports each block's gradients final as soon as its iteration is done
  // (data-parallel training reduces them while the blocks below run). The model alone has a loop
  // of its own: forward(idx, no_adapters) would hand the blocks' backward both the model and a part
  // of it, and adgen then reports the model's gradients only at the end.
  Tensor forward(const Tokens& idx) const {
    const std::int64_t B = idx.B(), T = idx.T();
    Tensor x = llmcc::token_embedding(idx, model.embed_tokens);  // (B, T, C)
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      if (checkpoint_blocks)
        x = llmcc::adgen::checkpoint(model.layers[l].forward(x, B, T, no_adapters.layers[l]));  // (B, T, C)
      else
        x = model.layers[l].forward(x, B, T, no_adapters.layers[l]);  // (B, T, C)
    }
    Tensor h = model.norm.forward(x);  // (B, T, C)
    Tensor logits;                     // (B, T, V)
    if (cfg.tie_embeddings)
      logits = llmcc::linear_nobias(h, model.embed_tokens);
    else
      logits = llmcc::linear_nobias(h, lm_head[0].w);
    return logits;
  }
  Tensor forward(const Tokens& idx, const Qwen3Lora& lora) const {
    const std::int64_t B = idx.B(), T = idx.T();
    Tensor x = llmcc::token_embedding(idx, model.embed_tokens);  // (B, T, C)
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      if (checkpoint_blocks)
        x = llmcc::adgen::checkpoint(model.layers[l].forward(x, B, T, lora.layers[l]));  // (B, T, C)
      else
        x = model.layers[l].forward(x, B, T, lora.layers[l]);  // (B, T, C)
    }
    Tensor h = model.norm.forward(x);  // (B, T, C)
    Tensor logits;                     // (B, T, V)
    if (cfg.tie_embeddings)
      logits = llmcc::linear_nobias(h, model.embed_tokens);
    else
      logits = llmcc::linear_nobias(h, lm_head[0].w);
    return logits;
  }

  // Generation (models/kv_cache.h): the logits (1, 1, V) after the new tokens idx ((1, T), at
  // positions cache.pos()..), each layer keeping their keys and values in the cache.
  Tensor decode(const Tokens& idx, KvCache& cache) const { return decode(idx, cache, no_adapters); }
  Tensor decode(const Tokens& idx, KvCache& cache, const Qwen3Lora& lora) const {
    const std::int64_t C = cfg.n_embd, T = idx.T();
    Tensor x = llmcc::token_embedding(idx, model.embed_tokens);  // (1, T, C)
    for (int l = 0; l < cfg.n_layer; ++l) x = model.layers[l].decode(cache.carry(x), cache, l, lora.layers[l]);
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

// The same loss of `base` with adapters, differentiated with respect to the adapters only: base
// gets no adjoint, so the backward computes no weight gradient of it.
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("lora") inline float qwen3_lora_loss(const Qwen3Lora& lora, const Qwen3& base,
                                                                       const Tokens& idx, const Tokens& targets) {
  return llmcc::cross_entropy(base.forward(idx, lora), targets, base.cfg.vocab_size, -1);
}

// Adapters for `base` (declared, no storage; bind with llmcc::bind_parameters): one on each map
// cfg.targets names in every layer, by the short names q, k, v, o (attention) and gate, up, down
// (the MLP). An unknown name, a rank below 1 or an alpha that is not a positive number throws
// llmcc::Error naming it.
Qwen3Lora qwen3_lora(const Qwen3& base, const LoraConfig& cfg);
// The short names qwen3_lora takes, in the order of the maps in a block.
const std::vector<std::string>& qwen3_lora_targets();
// Every adapter's PEFT initialisation (lora_init), in parameter list order from Rng(seed).
// Every adapter, in parameter list order.
std::vector<Qwen3LoraAdapter*> qwen3_lora_adapters(Qwen3Lora& lora);
void qwen3_lora_init(Qwen3Lora& lora, std::uint64_t seed);
// Adds every adapter's update into the matrix it adapts (lora_merge).
void qwen3_lora_merge(Qwen3& base, const Qwen3Lora& lora);

// Initialisation as Llama's: every weight matrix and the embedding N(0, 0.02), residual
// projections (o_proj, down_proj) N(0, 0.02 / sqrt(2 L)), RMSNorm gains (q and k norms too) one.
// Draws from Rng(seed) in parameter list order, so the same seed gives the same model.
void qwen3_init(Qwen3& model, std::uint64_t seed);

}  // namespace llmcc::models
