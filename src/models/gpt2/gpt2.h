// GPT-2 as plain forward code. adgen reads this file and generates its backward
// (generated/gpt2.grad.{h,cpp}, `gpt2_loss_grad`); there is no hand-written model backward.
//
// Token + position embedding, n_layer pre-LN blocks (causal self-attention, GELU MLP, each with a
// residual), a final layernorm and an LM head tied to the token embedding. wte has
// padded_vocab_size rows (llm.c's padding); the rows past vocab_size are never indexed and
// cross_entropy gives their logits no gradient, so they stay as initialised (zero).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/lora_linear.h"
#include "models/gpt2/gpt2_config.h"
#include "models/kv_cache.h"
#include "models/lora.h"

namespace llmcc::models {

struct Gpt2LayerNorm {
  Tensor w LLMCC_ADGEN_NAME("weight");                                         // (C)
  Tensor b LLMCC_ADGEN_NAME("bias");                                           // (C)
  Tensor forward(const Tensor& x) const { return llmcc::layernorm(x, w, b); }  // (B, T, C)
};

struct Gpt2Linear {
  Tensor w LLMCC_ADGEN_NAME("weight");                                      // (OC, C)
  Tensor b LLMCC_ADGEN_NAME("bias");                                        // (OC)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, w, b); }  // (B, T, OC)
};

// A LoRA adapter (models/lora.h): the update (alpha / r) (x A^T) B^T of one linear map, added
// with the map's product and bias by one op.
struct Gpt2LoraAdapter {
  float scale = 1.0f;                          // alpha / r
  LoraDropout dropout;                         // on the update's input: p 0 but in training steps
  Tensor a LLMCC_ADGEN_NAME("lora_A.weight");  // (r, in)
  Tensor b LLMCC_ADGEN_NAME("lora_B.weight");  // (out, r)

  // The adapted map of x (..., in) with the frozen weight w (out, in) and bias (out):
  // x w^T + bias + scale (x A^T) B^T, (..., out) (llmcc/ops/lora_linear.h).
  Tensor forward(const Tensor& x, const Tensor& w, const Tensor& bias) const {
    return llmcc::lora_linear(x, w, bias, a, b, scale, dropout);
  }
};

// LoRA adapters of a block's attention and MLP: at most one per map, named as the map
// ("h.0.attn.c_attn.lora_A.weight"). Each map's function is x w^T + bias, through the map's
// adapter when it has one (adgen reads no function of a std::vector argument, so each map has
// its own).
struct Gpt2AttentionLora {
  std::vector<Gpt2LoraAdapter> c_attn LLMCC_ADGEN_OPTIONAL;
  std::vector<Gpt2LoraAdapter> c_proj LLMCC_ADGEN_OPTIONAL;
  Tensor apply_c_attn(const Tensor& x, const Tensor& w, const Tensor& bias) const {
    if (c_attn.empty())
      return llmcc::linear(x, w, bias);
    else
      return c_attn[0].forward(x, w, bias);
  }
  Tensor apply_c_proj(const Tensor& x, const Tensor& w, const Tensor& bias) const {
    if (c_proj.empty())
      return llmcc::linear(x, w, bias);
    else
      return c_proj[0].forward(x, w, bias);
  }
};
struct Gpt2MlpLora {
  std::vector<Gpt2LoraAdapter> c_fc LLMCC_ADGEN_OPTIONAL;
  std::vector<Gpt2LoraAdapter> c_proj LLMCC_ADGEN_OPTIONAL;
  Tensor apply_c_fc(const Tensor& x, const Tensor& w, const Tensor& bias) const {
    if (c_fc.empty())
      return llmcc::linear(x, w, bias);
    else
      return c_fc[0].forward(x, w, bias);
  }
  Tensor apply_c_proj(const Tensor& x, const Tensor& w, const Tensor& bias) const {
    if (c_proj.empty())
      return llmcc::linear(x, w, bias);
    else
      return c_proj[0].forward(x, w, bias);
  }
};
struct Gpt2BlockLora {
  Gpt2AttentionLora attn;
  Gpt2MlpLora mlp;
};

// A model's adapters: one Gpt2BlockLora per layer.
struct Gpt2Lora {
  std::vector<Gpt2BlockLora> h;
};

struct Gpt2Attention {
  int n_head = 0;
  Gpt2Linear c_attn;  // (3C, C): rows [0, C) q, [C, 2C) k, [2C, 3C) v, as llm.c's qkvw and HF's c_attn
  Gpt2Linear c_proj;  // (C, C)
  // lora: this block's adapters (an empty set leaves the maps as they are).
  Tensor forward(const Tensor& x, const Gpt2AttentionLora& lora) const {  // x: (B, T, C)
    // One (B*T, 3C) GEMM for q, k and v together: faster than three (B*T, C) ones at small B*T.
    Tensor qkv = lora.apply_c_attn(x, c_attn.w, c_attn.b);  // (B, T, 3C)
    Tensor y = llmcc::attention_qkv(qkv, n_head, n_head);   // (B, T, C)
    return lora.apply_c_proj(y, c_proj.w, c_proj.b);        // (B, T, C)
  }
  // Generation: x's rows are new positions; their keys and values go into `layer` of the cache.
  Tensor decode(const Tensor& x, KvCache& cache, int layer, const Gpt2AttentionLora& lora) const {  // x: (1, T, C)
    Tensor qkv = lora.apply_c_attn(x, c_attn.w, c_attn.b);                                          // (1, T, 3C)
    return lora.apply_c_proj(kv_attention_qkv(qkv, cache, layer, n_head), c_proj.w, c_proj.b);      // (1, T, C)
  }
};

struct Gpt2Mlp {
  Gpt2Linear c_fc;                                                  // (4C, C)
  Gpt2Linear c_proj;                                                // (C, 4C)
  Tensor forward(const Tensor& x, const Gpt2MlpLora& lora) const {  // x: (B, T, C)
    Tensor h = llmcc::gelu(lora.apply_c_fc(x, c_fc.w, c_fc.b));     // (B, T, 4C)
    return lora.apply_c_proj(h, c_proj.w, c_proj.b);                // (B, T, C)
  }
};

struct Gpt2Block {
  Gpt2LayerNorm ln_1;
  Gpt2Attention attn;
  Gpt2LayerNorm ln_2;
  Gpt2Mlp mlp;
  Tensor forward(const Tensor& x, const Gpt2BlockLora& lora) const {  // x: (B, T, C)
    Tensor h = x + attn.forward(ln_1.forward(x), lora.attn);
    return h + mlp.forward(ln_2.forward(h), lora.mlp);
  }
  Tensor decode(const Tensor& x, KvCache& cache, int layer, const Gpt2BlockLora& lora) const {  // x: (1, T, C)
    Tensor h = x + attn.decode(ln_1.forward(x), cache, layer, lora.attn);
    return h + mlp.forward(ln_2.forward(h), lora.mlp);
  }
};

// The parameter list (checkpoints, the optimizer, zeroing, counting and the gradient buffer all
// follow it) is generated from the fields: field order, Hugging Face's names ("wte", "wpe",
// "h.0.ln_1.weight", ..., "ln_f.bias"). Call llmcc::for_each_parameter(model, f) from a file that
// includes the generated gpt2.grad.h (not from this header, which adgen reads).
struct Gpt2 {
  Gpt2Config cfg;
  Tensor wte;  // (padded_vocab_size, C), also the LM head
  Tensor wpe;  // (max_seq_len, C)
  std::vector<Gpt2Block> h;
  Gpt2LayerNorm ln_f;
  // n_layer empty adapter sets: what forward and decode use for the model alone.
  Gpt2Lora no_adapters;
  // A run option, not part of the model: the gradient saves each block's input only and runs the
  // block's forward again in the backward (adgen's checkpoint).
  bool checkpoint_blocks = false;

  // Declares every parameter's shape (no storage); bind with llmcc::bind_parameters(model).
  explicit Gpt2(const Gpt2Config& config);
  Gpt2() = default;

  // Logits over the padded vocabulary. idx: (B, T) with T <= max_seq_len; returns (B, T, Vp).
  // lora: adapters with lora.h[l] for layer l.
  //
  // Both loops run over h.size(): adgen then knows each iteration's block is its own, and the
  // backward reports each block's gradients final as soon as its iteration is done (data-parallel
  // training reduces them while the blocks below run). The model alone has a loop of its own:
  // forward(idx, no_adapters) would hand the blocks' backward both the model and a part of it, and
  // adgen then reports the model's gradients only at the end.
  Tensor forward(const Tokens& idx) const {
    Tensor x = llmcc::token_position_embedding(idx, wte, wpe);  // (B, T, C)
    for (std::size_t l = 0; l < h.size(); ++l) {
      if (checkpoint_blocks)
        x = llmcc::adgen::checkpoint(h[l].forward(x, no_adapters.h[l]));  // (B, T, C)
      else
        x = h[l].forward(x, no_adapters.h[l]);  // (B, T, C)
    }
    return llmcc::linear_nobias(ln_f.forward(x), wte);  // (B, T, Vp)
  }
  Tensor forward(const Tokens& idx, const Gpt2Lora& lora) const {
    Tensor x = llmcc::token_position_embedding(idx, wte, wpe);  // (B, T, C)
    for (std::size_t l = 0; l < h.size(); ++l) {
      if (checkpoint_blocks)
        x = llmcc::adgen::checkpoint(h[l].forward(x, lora.h[l]));  // (B, T, C)
      else
        x = h[l].forward(x, lora.h[l]);  // (B, T, C)
    }
    return llmcc::linear_nobias(ln_f.forward(x), wte);  // (B, T, Vp)
  }

  // Generation (models/kv_cache.h): the logits (1, 1, Vp) after the new tokens idx ((1, T), at
  // positions cache.pos()..), each layer keeping their keys and values in the cache. A prefill
  // runs the forward's ops on the prompt; a decode step runs them on one row.
  Tensor decode(const Tokens& idx, KvCache& cache) const { return decode(idx, cache, no_adapters); }
  Tensor decode(const Tokens& idx, KvCache& cache, const Gpt2Lora& lora) const {
    const std::int64_t C = cfg.n_embd, T = idx.T(), pos = cache.pos();
    // Rows pos.. of wpe, in its dtype (bf16 in a LoRA model's frozen base): (maxT - pos, C).
    const Tensor positions(static_cast<char*>(wpe.raw()) + pos * C * static_cast<std::int64_t>(dtype_size(wpe.dtype())),
                           {cfg.max_seq_len - pos, C}, wpe.dtype());
    Tensor x = llmcc::token_position_embedding(idx, wte, positions);  // (1, T, C)
    for (int l = 0; l < cfg.n_layer; ++l) x = h[l].decode(cache.carry(x), cache, l, lora.h[l]);
    x = cache.carry(x);                                    // (1, T, C)
    const Tensor last(x.f32() + (T - 1) * C, {1, 1, C});   // (1, 1, C)
    return llmcc::linear_nobias(ln_f.forward(last), wte);  // (1, 1, Vp)
  }
};

// Mean cross-entropy of next-token prediction; targets equal to -1 are ignored.
// idx, targets: (B, T).
LLMCC_ADGEN_ENTRY inline float gpt2_loss(const Gpt2& m, const Tokens& idx, const Tokens& targets) {
  return llmcc::cross_entropy(m.forward(idx), targets, m.cfg.vocab_size, -1);
}

// The same loss of `base` with adapters, differentiated with respect to the adapters only: base
// gets no adjoint, so the backward computes no weight gradient of it.
LLMCC_ADGEN_ENTRY LLMCC_ADGEN_WRT("lora") inline float gpt2_lora_loss(const Gpt2Lora& lora, const Gpt2& base,
                                                                      const Tokens& idx, const Tokens& targets) {
  return llmcc::cross_entropy(base.forward(idx, lora), targets, base.cfg.vocab_size, -1);
}

// GPT-2's initialisation (as llm.c and nanoGPT): every weight matrix and both embeddings
// N(0, 0.02), residual projections (attn.c_proj, mlp.c_proj weights) N(0, 0.02 / sqrt(2 L)),
// biases zero, layernorm weights one, padded vocabulary rows zero. Draws from Rng(seed) in
// parameter list order, so the same seed gives the same model.
void gpt2_init(Gpt2& model, std::uint64_t seed);

// Adapters for `base` (declared, no storage; bind with llmcc::bind_parameters): one on each map
// cfg.targets names in every layer, by Hugging Face's module names as PEFT matches them: c_attn
// (q, k and v together), c_proj (both the attention's output and the MLP's down projection, as
// PEFT's "c_proj" matches both) and c_fc. Throws llmcc::Error naming a bad setting.
Gpt2Lora gpt2_lora(const Gpt2& base, const LoraConfig& cfg);
// The short names gpt2_lora takes.
const std::vector<std::string>& gpt2_lora_targets();
// Every adapter, in parameter list order.
std::vector<Gpt2LoraAdapter*> gpt2_lora_adapters(Gpt2Lora& lora);
// Every adapter's PEFT initialisation (lora_init), in parameter list order from Rng(seed).
void gpt2_lora_init(Gpt2Lora& lora, std::uint64_t seed);
// Adds every adapter's update into the matrix it adapts (lora_merge).
void gpt2_lora_merge(Gpt2& base, const Gpt2Lora& lora);

}  // namespace llmcc::models
