// A GPT-2-shaped module tree on the library's rules: token+position embedding, a loop over
// std::vector<Block>, pre-norm attention and MLP blocks with residuals, a final layernorm and
// an LM head tied to the token embedding (wte used twice), cross-entropy loss.
#pragma once

#include <string>
#include <vector>

#include "llmcc/ops/add.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/embedding.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"

namespace gpt {

using llmcc::Tensor;
using llmcc::Tokens;

struct Config {
  int V = 11;   // vocabulary
  int C = 8;    // channels
  int NH = 2;   // heads
  int L = 2;    // layers
  int maxT = 8;
};

struct LayerNorm {
  Tensor w, b;  // (C)
  Tensor forward(const Tensor& x) const { return llmcc::layernorm(x, w, b); }
};

struct Linear {
  Tensor w;  // (OC, C)
  Tensor b;  // (OC)
  Tensor forward(const Tensor& x) const { return llmcc::linear(x, w, b); }
};

struct Attention {
  int n_head = 2;
  Linear q, k, v, proj;
  Tensor forward(const Tensor& x) const {
    Tensor y = llmcc::attention(q.forward(x), k.forward(x), v.forward(x), n_head, n_head);  // (B, T, C)
    return proj.forward(y);
  }
};

struct Mlp {
  Linear fc, proj;
  Tensor forward(const Tensor& x) const { return proj.forward(llmcc::gelu(fc.forward(x))); }
};

struct Block {
  LayerNorm ln1;
  Attention attn;
  LayerNorm ln2;
  Mlp mlp;
  Tensor forward(const Tensor& x) const {
    Tensor h = x + attn.forward(ln1.forward(x));
    return h + mlp.forward(ln2.forward(h));
  }
};

struct Gpt {
  Config cfg;
  Tensor wte;  // (V, C), also the LM head
  Tensor wpe;  // (maxT, C)
  std::vector<Block> h;
  LayerNorm ln_f;
  // Checkpoint order (Hugging Face names); the gradient buffer from adgen::make_grad follows it.
  template <class F>
  void for_each_parameter(F&& f) {
    f("wpe", wpe);
    f("wte", wte);
    for (std::size_t i = 0; i < h.size(); ++i) {
      const std::string p = "h." + std::to_string(i) + ".";
      Block& b = h[i];
      f(p + "ln_1.weight", b.ln1.w), f(p + "ln_1.bias", b.ln1.b);
      for (Linear* l : {&b.attn.q, &b.attn.k, &b.attn.v, &b.attn.proj, &b.mlp.fc, &b.mlp.proj})
        f(p + "linear.weight", l->w), f(p + "linear.bias", l->b);
      f(p + "ln_2.weight", b.ln2.w), f(p + "ln_2.bias", b.ln2.b);
    }
    f("ln_f.weight", ln_f.w), f("ln_f.bias", ln_f.b);
  }
  Tensor forward(const Tokens& idx) const {
    Tensor x = llmcc::token_position_embedding(idx, wte, wpe);  // (B, T, C)
    for (const Block& b : h) x = b.forward(x);
    return llmcc::linear_nobias(ln_f.forward(x), wte);  // (B, T, V)
  }
};

LLMCC_ADGEN_ENTRY inline float gpt_loss(const Gpt& m, const Tokens& idx, const Tokens& targets) {
  return llmcc::cross_entropy(m.forward(idx), targets, m.cfg.V, -1);
}

}  // namespace gpt
