// A Llama-shaped module tree on the library's rules: RMSNorm, RoPE, grouped-query attention,
// a SwiGLU MLP (silu(x W1) * (x W3), the `*` operator mapped to mul), an untied head, and a
// counted loop over the layers bounded by the config.
#pragma once

#include <vector>

#include "llmcc/ops/add.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/mul.h"
#include "llmcc/ops/rmsnorm.h"
#include "llmcc/ops/rope.h"
#include "llmcc/ops/silu.h"

namespace llama {

using llmcc::Tensor;
using llmcc::Tokens;

struct Config {
  int V = 13;     // vocabulary
  int C = 8;      // channels
  int NH = 2;     // query heads
  int NKV = 1;    // key/value heads
  int L = 2;      // layers
  int FF = 12;    // MLP hidden size
};

struct RmsNorm {
  float eps = 1e-5f;  // configuration
  Tensor w;           // (C)
  Tensor forward(const Tensor& x) const { return llmcc::rmsnorm(x, w, eps); }
};

struct Attention {
  int n_head = 2, n_kv_head = 1;
  float theta = 10000.0f;
  Tensor wq;  // (C, C)
  Tensor wk;  // (NKV * HS, C)
  Tensor wv;  // (NKV * HS, C)
  Tensor wo;  // (C, C)
  Tensor forward(const Tensor& x) const {
    Tensor q = llmcc::rope(llmcc::linear_nobias(x, wq), n_head, theta, 0);     // (B, T, C)
    Tensor k = llmcc::rope(llmcc::linear_nobias(x, wk), n_kv_head, theta, 0);  // (B, T, NKV * HS)
    Tensor v = llmcc::linear_nobias(x, wv);                                    // (B, T, NKV * HS)
    return llmcc::linear_nobias(llmcc::attention(q, k, v, n_head, n_kv_head), wo);
  }
};

struct Mlp {
  Tensor w1, w3;  // (FF, C)
  Tensor w2;      // (C, FF)
  Tensor forward(const Tensor& x) const {
    return llmcc::linear_nobias(llmcc::silu(llmcc::linear_nobias(x, w1)) * llmcc::linear_nobias(x, w3), w2);
  }
};

struct Block {
  RmsNorm n1;
  Attention attn;
  RmsNorm n2;
  Mlp mlp;
  Tensor forward(const Tensor& x) const {
    Tensor h = x + attn.forward(n1.forward(x));
    return h + mlp.forward(n2.forward(h));
  }
};

struct Llama {
  Config cfg;
  Tensor tok;   // (V, C)
  std::vector<Block> layers;
  RmsNorm norm;
  Tensor head;  // (V, C), untied
  Tensor forward(const Tokens& idx) const {
    Tensor x = llmcc::token_embedding(idx, tok);  // (B, T, C)
    for (int l = 0; l < cfg.L; ++l) x = layers[l].forward(x);
    return llmcc::linear_nobias(norm.forward(x), head);  // (B, T, V)
  }
};

LLMCC_ADGEN_ENTRY inline float llama_loss(const Llama& m, const Tokens& idx, const Tokens& targets) {
  const float loss = llmcc::cross_entropy(m.forward(idx), targets, m.cfg.V, -1);
  return loss;
}

}  // namespace llama
