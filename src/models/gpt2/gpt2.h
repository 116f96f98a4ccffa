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
#include "models/gpt2/gpt2_config.h"
#include "models/kv_cache.h"

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

struct Gpt2Attention {
  int n_head = 0;
  Gpt2Linear c_attn;  // (3C, C): rows [0, C) q, [C, 2C) k, [2C, 3C) v, as llm.c's qkvw and HF's c_attn
  Gpt2Linear c_proj;  // (C, C)
  Tensor forward(const Tensor& x) const {  // x: (B, T, C)
    // One (B*T, 3C) GEMM for q, k and v together: faster than three (B*T, C) ones at small B*T.
    Tensor qkv = c_attn.forward(x);                        // (B, T, 3C)
    Tensor y = llmcc::attention_qkv(qkv, n_head, n_head);  // (B, T, C)
    return c_proj.forward(y);                              // (B, T, C)
  }
  // Generation: x's rows are new positions; their keys and values go into `layer` of the cache.
  Tensor decode(const Tensor& x, KvCache& cache, int layer) const {      // x: (1, T, C)
    Tensor qkv = c_attn.forward(x);                                      // (1, T, 3C)
    return c_proj.forward(kv_attention_qkv(qkv, cache, layer, n_head));  // (1, T, C)
  }
};

struct Gpt2Mlp {
  Gpt2Linear c_fc;                                                                                // (4C, C)
  Gpt2Linear c_proj;                                                                              // (C, 4C)
  Tensor forward(const Tensor& x) const { return c_proj.forward(llmcc::gelu(c_fc.forward(x))); }  // (B, T, C)
};

struct Gpt2Block {
  Gpt2LayerNorm ln_1;
  Gpt2Attention attn;
  Gpt2LayerNorm ln_2;
  Gpt2Mlp mlp;
  Tensor forward(const Tensor& x) const {  // x: (B, T, C)
    Tensor h = x + attn.forward(ln_1.forward(x));
    return h + mlp.forward(ln_2.forward(h));
  }
  Tensor decode(const Tensor& x, KvCache& cache, int layer) const {  // x: (1, T, C)
    Tensor h = x + attn.decode(ln_1.forward(x), cache, layer);
    return h + mlp.forward(ln_2.forward(h));
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
  // A run option, not part of the model: the gradient saves each block's input only and runs the
  // block's forward again in the backward (adgen's checkpoint).
  bool checkpoint_blocks = false;

  // Declares every parameter's shape (no storage); bind with llmcc::bind_parameters(model).
  explicit Gpt2(const Gpt2Config& config);
  Gpt2() = default;

  // Logits over the padded vocabulary. idx: (B, T) with T <= max_seq_len; returns (B, T, Vp).
  Tensor forward(const Tokens& idx) const {
    Tensor x = llmcc::token_position_embedding(idx, wte, wpe);  // (B, T, C)
    for (const Gpt2Block& b : h) {
      if (checkpoint_blocks)
        x = llmcc::adgen::checkpoint(b.forward(x));  // (B, T, C)
      else
        x = b.forward(x);  // (B, T, C)
    }
    return llmcc::linear_nobias(ln_f.forward(x), wte);  // (B, T, Vp)
  }

  // Generation (models/kv_cache.h): the logits (1, 1, Vp) after the new tokens idx ((1, T), at
  // positions cache.pos()..), each layer keeping their keys and values in the cache. A prefill
  // runs the forward's ops on the prompt; a decode step runs them on one row.
  Tensor decode(const Tokens& idx, KvCache& cache) const {
    const std::int64_t C = cfg.n_embd, T = idx.T(), pos = cache.pos();
    const Tensor positions(wpe.f32() + pos * C, {cfg.max_seq_len - pos, C});  // rows pos.. of wpe
    Tensor x = llmcc::token_position_embedding(idx, wte, positions);          // (1, T, C)
    for (int l = 0; l < cfg.n_layer; ++l) x = h[l].decode(cache.carry(x), cache, l);
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

// GPT-2's initialisation (as llm.c and nanoGPT): every weight matrix and both embeddings
// N(0, 0.02), residual projections (attn.c_proj, mlp.c_proj weights) N(0, 0.02 / sqrt(2 L)),
// biases zero, layernorm weights one, padded vocabulary rows zero. Draws from Rng(seed) in
// parameter list order, so the same seed gives the same model.
void gpt2_init(Gpt2& model, std::uint64_t seed);

}  // namespace llmcc::models
