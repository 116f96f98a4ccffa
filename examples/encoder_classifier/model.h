// A small Transformer encoder that classifies whole sequences: token + position embeddings, L
// pre-LN blocks of bidirectional (non-causal) self-attention and a GELU MLP, a final layernorm,
// the mean over the sequence, and a linear head over the classes. adgen reads this file and
// generates the backward (encoder_loss_grad) and the trait the Trainer takes (encoder_loss_Entry).
#pragma once

#include <cstdint>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/ops/add.h"
#include "llmcc/ops/bidirectional_attention.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/mean_pool.h"

namespace encoder {

using llmcc::Tensor;
using llmcc::Tokens;

struct Config {
  int V = 0;        // vocabulary
  int T = 0;        // sequence length (positions)
  int C = 0;        // channels
  int n_head = 0;   // attention heads (C % n_head == 0)
  int L = 0;        // blocks
  int classes = 0;  // output classes
};

struct LayerNorm {
  Tensor w LLMCC_ADGEN_NAME("weight");  // (C)
  Tensor b LLMCC_ADGEN_NAME("bias");    // (C)
  Tensor forward(const Tensor& x) const { return llmcc::layernorm(x, w, b); }
};

struct Linear {
  Tensor w LLMCC_ADGEN_NAME("weight");  // (OC, IC)
  Tensor b LLMCC_ADGEN_NAME("bias");    // (OC)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, w, b); }
};

struct SelfAttention {
  int n_head = 0;
  Linear q, k, v;                          // (C, C) each
  Linear proj;                             // (C, C)
  Tensor forward(const Tensor& x) const {  // x: (B, T, C)
    return proj.forward(llmcc::bidirectional_attention(q.forward(x), k.forward(x), v.forward(x), n_head));
  }
};

struct Mlp {
  Linear fc;    // (4C, C)
  Linear proj;  // (C, 4C)
  Tensor forward(const Tensor& x) const { return proj.forward(llmcc::gelu(fc.forward(x))); }
};

struct Block {
  LayerNorm ln_1;
  SelfAttention attn;
  LayerNorm ln_2;
  Mlp mlp;
  Tensor forward(const Tensor& x) const {  // x: (B, T, C)
    Tensor h = x + attn.forward(ln_1.forward(x));
    return h + mlp.forward(ln_2.forward(h));
  }
};

struct Encoder {
  Config cfg;
  Tensor wte;  // (V, C)
  Tensor wpe;  // (T, C)
  std::vector<Block> blocks;
  LayerNorm ln_f;
  Linear head;  // (classes, C)

  Encoder() = default;
  // Declares every parameter's shape (no storage); llmcc::bind_parameters(model) binds them in
  // the order adgen lists them (the fields': wte, wpe, blocks.0.ln_1.weight, ..., head.bias).
  explicit Encoder(const Config& c) : cfg(c), wte(nullptr, {c.V, c.C}), wpe(nullptr, {c.T, c.C}) {
    auto linear = [](std::int64_t out, std::int64_t in) {
      return Linear{Tensor(nullptr, {out, in}), Tensor(nullptr, {out})};
    };
    auto norm = [&] { return LayerNorm{Tensor(nullptr, {c.C}), Tensor(nullptr, {c.C})}; };
    for (int l = 0; l < c.L; ++l) {
      Block b;
      b.ln_1 = norm();
      b.attn = SelfAttention{c.n_head, linear(c.C, c.C), linear(c.C, c.C), linear(c.C, c.C), linear(c.C, c.C)};
      b.ln_2 = norm();
      b.mlp = Mlp{linear(4 * c.C, c.C), linear(c.C, 4 * c.C)};
      blocks.push_back(b);
    }
    ln_f = norm();
    head = linear(c.classes, c.C);
  }

  // idx: (B, T) token ids; returns the class logits (B, classes).
  Tensor forward(const Tokens& idx) const {
    Tensor x = llmcc::token_position_embedding(idx, wte, wpe);  // (B, T, C)
    for (const Block& b : blocks) x = b.forward(x);             // (B, T, C)
    Tensor pooled = llmcc::mean_pool(ln_f.forward(x));          // (B, C)
    return head.forward(pooled);                                // (B, classes)
  }
};

// Mean cross-entropy of the labels. idx: (B, T); label: (B, 1), each in [0, classes).
LLMCC_ADGEN_ENTRY inline float encoder_loss(const Encoder& m, const Tokens& idx, const Tokens& label) {
  return llmcc::cross_entropy(m.forward(idx), label, m.cfg.classes, -1);
}

}  // namespace encoder
