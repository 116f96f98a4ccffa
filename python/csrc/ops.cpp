// llmcc's ops as PyTorch operators (namespace `llmcc`, CPU float32): each forward returns its
// output and what its backward reads; each backward calls the op's llmcc pullback. The autograd
// formulas that connect them, and the shapes torch.compile traces with, are registered in
// llmcc_torch/ops.py. Shapes are llmcc's (include/llmcc/ops/*.h); llmcc's front ends check them.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "llmcc/arena.h"
#include "llmcc/ops/attention.h"
#include "llmcc/ops/cross_entropy.h"
#include "llmcc/ops/gelu.h"
#include "llmcc/ops/layernorm.h"
#include "llmcc/ops/linear.h"
#include "llmcc/ops/rmsnorm.h"
#include "llmcc/ops/rope.h"
#include "llmcc/ops/silu.h"
#include "torch_bridge.h"

namespace llmcc_torch {
namespace {

using Tensor2 = std::tuple<at::Tensor, at::Tensor>;
using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// An arena whose every allocation is a new torch tensor, current while it lives.
struct TorchOutputs {
  TorchArenaSource source;
  llmcc::Arena arena{source};
  llmcc::ArenaScope scope{arena};
  at::Tensor operator()(const llmcc::Tensor& t) const { return source.output(t); }
};

int to_int(const char* op, const char* name, std::int64_t v) {
  TORCH_CHECK_VALUE(v >= 0 && v <= (1 << 30), "[", op, "] ", name, " is ", v, ", expected a count >= 0");
  return static_cast<int>(v);
}

// ---- attention ---------------------------------------------------------------------------

// q (B, T, NH * HS), k and v (B, T, NKV * HS) -> out (B, T, NH * HS), lse (B, NH, T)
Tensor2 attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, std::int64_t n_head,
                  std::int64_t n_kv_head) {
  const char* op = "attention";
  const at::Tensor q = checked_float(op, "q", q_in, 3, 3);
  const at::Tensor k = checked_float(op, "k", k_in, 3, 3);
  const at::Tensor v = checked_float(op, "v", v_in, 3, 3);
  return run([&] {
    TorchOutputs outputs;
    llmcc::AttentionSaved saved;
    const llmcc::Tensor out = llmcc::attention_fwd(view(q), view(k), view(v), to_int(op, "n_head", n_head),
                                                   to_int(op, "n_kv_head", n_kv_head), saved);
    return Tensor2{outputs(out), outputs(saved.lse)};
  });
}

// -> d_q, d_k, d_v, each the shape of its input
Tensor3 attention_backward(const at::Tensor& d_out_in, const at::Tensor& q_in, const at::Tensor& k_in,
                           const at::Tensor& v_in, const at::Tensor& out_in, const at::Tensor& lse_in,
                           std::int64_t n_head, std::int64_t n_kv_head) {
  const char* op = "attention_backward";
  const at::Tensor d_out = checked_float(op, "d_out", d_out_in, 3, 3);
  const at::Tensor q = checked_float(op, "q", q_in, 3, 3);
  const at::Tensor k = checked_float(op, "k", k_in, 3, 3);
  const at::Tensor v = checked_float(op, "v", v_in, 3, 3);
  const at::Tensor out = checked_float(op, "out", out_in, 3, 3);
  const at::Tensor lse = checked_float(op, "lse", lse_in, 3, 3);
  return run([&] {
    TorchOutputs working;  // some pullbacks take working memory from the arena
    Adjoint d_q = pending_adjoint(q.sizes()), d_k = pending_adjoint(k.sizes()), d_v = pending_adjoint(v.sizes());
    llmcc::attention_pullback(view(q), view(k), view(v), to_int(op, "n_head", n_head),
                              to_int(op, "n_kv_head", n_kv_head), view(out), llmcc::AttentionSaved{view(lse)},
                              view(d_out), &d_q.handle, &d_k.handle, &d_v.handle);
    settle(d_q), settle(d_k), settle(d_v);
    return Tensor3{d_q.torch, d_k.torch, d_v.torch};
  });
}

// qkv (B, T, (NH + 2 NKV) * HS) -> out (B, T, NH * HS), lse (B, NH, T)
Tensor2 attention_qkv(const at::Tensor& qkv_in, std::int64_t n_head, std::int64_t n_kv_head) {
  const char* op = "attention_qkv";
  const at::Tensor qkv = checked_float(op, "qkv", qkv_in, 3, 3);
  return run([&] {
    TorchOutputs outputs;
    llmcc::AttentionSaved saved;
    const llmcc::Tensor out =
        llmcc::attention_qkv_fwd(view(qkv), to_int(op, "n_head", n_head), to_int(op, "n_kv_head", n_kv_head), saved);
    return Tensor2{outputs(out), outputs(saved.lse)};
  });
}

// -> d_qkv (B, T, (NH + 2 NKV) * HS)
at::Tensor attention_qkv_backward(const at::Tensor& d_out_in, const at::Tensor& qkv_in, const at::Tensor& out_in,
                                  const at::Tensor& lse_in, std::int64_t n_head, std::int64_t n_kv_head) {
  const char* op = "attention_qkv_backward";
  const at::Tensor d_out = checked_float(op, "d_out", d_out_in, 3, 3);
  const at::Tensor qkv = checked_float(op, "qkv", qkv_in, 3, 3);
  const at::Tensor out = checked_float(op, "out", out_in, 3, 3);
  const at::Tensor lse = checked_float(op, "lse", lse_in, 3, 3);
  return run([&] {
    TorchOutputs working;  // some pullbacks take working memory from the arena
    Adjoint d_qkv = pending_adjoint(qkv.sizes());
    llmcc::attention_qkv_pullback(view(qkv), to_int(op, "n_head", n_head), to_int(op, "n_kv_head", n_kv_head),
                                  view(out), llmcc::AttentionSaved{view(lse)}, view(d_out), &d_qkv.handle);
    settle(d_qkv);
    return d_qkv.torch;
  });
}

// ---- linear ------------------------------------------------------------------------------

// x (N, C) or (B, T, C), weight (OC, C), bias (OC) or none -> out (N, OC) or (B, T, OC)
at::Tensor linear(const at::Tensor& x_in, const at::Tensor& w_in, const std::optional<at::Tensor>& b_in) {
  const char* op = "linear";
  const at::Tensor x = checked_float(op, "x", x_in, 2, 3);
  const at::Tensor w = checked_float(op, "weight", w_in, 2, 2);
  const bool has_bias = b_in.has_value() && b_in->defined();
  const at::Tensor b = has_bias ? checked_float(op, "bias", *b_in, 1, 1) : at::Tensor();
  return run([&] {
    TorchOutputs outputs;
    return outputs(has_bias ? llmcc::linear(view(x), view(w), view(b)) : llmcc::linear_nobias(view(x), view(w)));
  });
}

// -> d_x, d_weight, d_bias (an empty tensor without a bias)
Tensor3 linear_backward(const at::Tensor& d_out_in, const at::Tensor& x_in, const at::Tensor& w_in,
                        const std::optional<at::Tensor>& b_in) {
  const char* op = "linear_backward";
  const at::Tensor d_out = checked_float(op, "d_out", d_out_in, 2, 3);
  const at::Tensor x = checked_float(op, "x", x_in, 2, 3);
  const at::Tensor w = checked_float(op, "weight", w_in, 2, 2);
  const bool has_bias = b_in.has_value() && b_in->defined();
  const at::Tensor b = has_bias ? checked_float(op, "bias", *b_in, 1, 1) : at::Tensor();
  return run([&] {
    TorchOutputs working;  // some pullbacks take working memory from the arena
    Adjoint d_x = pending_adjoint(x.sizes()), d_w = pending_adjoint(w.sizes());
    if (has_bias) {
      Adjoint d_b = pending_adjoint(b.sizes());
      llmcc::linear_pullback(view(x), view(w), view(b), view(d_out), view(d_out), &d_x.handle, &d_w.handle,
                             &d_b.handle);
      settle(d_x), settle(d_w), settle(d_b);
      return Tensor3{d_x.torch, d_w.torch, d_b.torch};
    }
    llmcc::linear_nobias_pullback(view(x), view(w), view(d_out), view(d_out), &d_x.handle, &d_w.handle);
    settle(d_x), settle(d_w);
    return Tensor3{d_x.torch, d_w.torch, at::empty({0}, at::kFloat)};
  });
}

// ---- layernorm, rmsnorm ------------------------------------------------------------------

// x (N, C) or (B, T, C), w and b (C) -> out (x's shape), mean (N), rstd (N)
Tensor3 layernorm(const at::Tensor& x_in, const at::Tensor& w_in, const at::Tensor& b_in) {
  const char* op = "layernorm";
  const at::Tensor x = checked_float(op, "x", x_in, 2, 3);
  const at::Tensor w = checked_float(op, "weight", w_in, 1, 1);
  const at::Tensor b = checked_float(op, "bias", b_in, 1, 1);
  return run([&] {
    TorchOutputs outputs;
    llmcc::LayerNormSaved saved;
    const llmcc::Tensor out = llmcc::layernorm_fwd(view(x), view(w), view(b), saved);
    return Tensor3{outputs(out), outputs(saved.mean), outputs(saved.rstd)};
  });
}

// -> d_x, d_w, d_b
Tensor3 layernorm_backward(const at::Tensor& d_out_in, const at::Tensor& x_in, const at::Tensor& w_in,
                           const at::Tensor& b_in, const at::Tensor& mean_in, const at::Tensor& rstd_in) {
  const char* op = "layernorm_backward";
  const at::Tensor d_out = checked_float(op, "d_out", d_out_in, 2, 3);
  const at::Tensor x = checked_float(op, "x", x_in, 2, 3);
  const at::Tensor w = checked_float(op, "weight", w_in, 1, 1);
  const at::Tensor b = checked_float(op, "bias", b_in, 1, 1);
  const at::Tensor mean = checked_float(op, "mean", mean_in, 1, 1);
  const at::Tensor rstd = checked_float(op, "rstd", rstd_in, 1, 1);
  return run([&] {
    TorchOutputs working;  // some pullbacks take working memory from the arena
    Adjoint d_x = pending_adjoint(x.sizes()), d_w = pending_adjoint(w.sizes()), d_b = pending_adjoint(b.sizes());
    llmcc::layernorm_pullback(view(x), view(w), view(b), view(x), llmcc::LayerNormSaved{view(mean), view(rstd)},
                              view(d_out), &d_x.handle, &d_w.handle, &d_b.handle);
    settle(d_x), settle(d_w), settle(d_b);
    return Tensor3{d_x.torch, d_w.torch, d_b.torch};
  });
}

// x (N, C) or (B, T, C), w (C) -> out (x's shape), rstd (N)
Tensor2 rmsnorm(const at::Tensor& x_in, const at::Tensor& w_in, double eps) {
  const char* op = "rmsnorm";
  const at::Tensor x = checked_float(op, "x", x_in, 2, 3);
  const at::Tensor w = checked_float(op, "weight", w_in, 1, 1);
  return run([&] {
    TorchOutputs outputs;
    llmcc::RmsNormSaved saved;
    const llmcc::Tensor out = llmcc::rmsnorm_fwd(view(x), view(w), static_cast<float>(eps), saved);
    return Tensor2{outputs(out), outputs(saved.rstd)};
  });
}

// -> d_x, d_w
Tensor2 rmsnorm_backward(const at::Tensor& d_out_in, const at::Tensor& x_in, const at::Tensor& w_in,
                         const at::Tensor& rstd_in, double eps) {
  const char* op = "rmsnorm_backward";
  const at::Tensor d_out = checked_float(op, "d_out", d_out_in, 2, 3);
  const at::Tensor x = checked_float(op, "x", x_in, 2, 3);
  const at::Tensor w = checked_float(op, "weight", w_in, 1, 1);
  const at::Tensor rstd = checked_float(op, "rstd", rstd_in, 1, 1);
  return run([&] {
    TorchOutputs working;  // some pullbacks take working memory from the arena
    Adjoint d_x = pending_adjoint(x.sizes()), d_w = pending_adjoint(w.sizes());
    llmcc::rmsnorm_pullback(view(x), view(w), static_cast<float>(eps), view(x), llmcc::RmsNormSaved{view(rstd)},
                            view(d_out), &d_x.handle, &d_w.handle);
    settle(d_x), settle(d_w);
    return Tensor2{d_x.torch, d_w.torch};
  });
}

// ---- gelu, silu, rope --------------------------------------------------------------------

// An element-wise activation and its pullback: x any shape of 1 to 4 dims, out and the
// adjoints the same.
template <llmcc::Tensor (*Forward)(const llmcc::Tensor&)>
at::Tensor activation(const char* op, const at::Tensor& x_in) {
  const at::Tensor x = checked_float(op, "x", x_in, 1, 4);
  return run([&] {
    TorchOutputs outputs;
    return outputs(Forward(view(x)));
  });
}

template <void (*Pullback)(const llmcc::Tensor&, const llmcc::Tensor&, const llmcc::Tensor&, llmcc::Tensor*)>
at::Tensor activation_backward(const char* op, const at::Tensor& d_out_in, const at::Tensor& x_in) {
  const at::Tensor d_out = checked_float(op, "d_out", d_out_in, 1, 4);
  const at::Tensor x = checked_float(op, "x", x_in, 1, 4);
  return run([&] {
    TorchOutputs working;  // some pullbacks take working memory from the arena
    Adjoint d_x = pending_adjoint(x.sizes());
    Pullback(view(x), view(x), view(d_out), &d_x.handle);  // `out` is not read: x stands in
    settle(d_x);
    return d_x.torch;
  });
}

at::Tensor gelu(const at::Tensor& x) { return activation<&llmcc::gelu>("gelu", x); }
at::Tensor gelu_backward(const at::Tensor& d_out, const at::Tensor& x) {
  return activation_backward<&llmcc::gelu_pullback>("gelu_backward", d_out, x);
}
at::Tensor silu(const at::Tensor& x) { return activation<&llmcc::silu>("silu", x); }
at::Tensor silu_backward(const at::Tensor& d_out, const at::Tensor& x) {
  return activation_backward<&llmcc::silu_pullback>("silu_backward", d_out, x);
}

// x (B, T, NH * HS) -> out: the same, pairs rotated (Meta's interleaved convention)
at::Tensor rope(const at::Tensor& x_in, std::int64_t n_head, double theta, std::int64_t pos_offset) {
  const char* op = "rope";
  const at::Tensor x = checked_float(op, "x", x_in, 3, 3);
  return run([&] {
    TorchOutputs outputs;
    return outputs(llmcc::rope(view(x), to_int(op, "n_head", n_head), static_cast<float>(theta),
                               to_int(op, "pos_offset", pos_offset)));
  });
}

at::Tensor rope_backward(const at::Tensor& d_out_in, std::int64_t n_head, double theta, std::int64_t pos_offset) {
  const char* op = "rope_backward";
  const at::Tensor d_out = checked_float(op, "d_out", d_out_in, 3, 3);
  return run([&] {
    TorchOutputs working;  // some pullbacks take working memory from the arena
    Adjoint d_x = pending_adjoint(d_out.sizes());
    llmcc::rope_pullback(view(d_out), to_int(op, "n_head", n_head), static_cast<float>(theta),
                         to_int(op, "pos_offset", pos_offset), view(d_out), view(d_out), &d_x.handle);
    settle(d_x);
    return d_x.torch;
  });
}

// ---- fused softmax + cross-entropy -------------------------------------------------------

llmcc::Tokens tokens_for(const at::Tensor& logits, const at::Tensor& targets) {
  // llmcc pairs (B, T, Vp) logits with (B, T) targets and (N, Vp) ones with any N ids.
  if (logits.dim() == 3 && targets.dim() == 2)
    return llmcc::Tokens(targets.data_ptr<std::int32_t>(), static_cast<int>(targets.size(0)),
                         static_cast<int>(targets.size(1)));
  return llmcc::Tokens(targets.data_ptr<std::int32_t>(), 1, static_cast<int>(targets.numel()));
}

// logits (N, Vp) or (B, T, Vp), targets (N) or (B, T) -> loss (), lse (N)
Tensor2 cross_entropy(const at::Tensor& logits_in, const at::Tensor& targets_in, std::int64_t vocab_size,
                      std::int64_t ignore_index) {
  const char* op = "cross_entropy";
  const at::Tensor logits = checked_float(op, "logits", logits_in, 2, 3);
  const at::Tensor targets = checked_targets(op, "targets", targets_in);
  TORCH_CHECK_VALUE(targets.dim() == logits.dim() - 1, "[", op, "] targets has shape ", targets.sizes(),
                    ", expected the leading dims of logits ", logits.sizes());
  return run([&] {
    TorchOutputs outputs;
    llmcc::CrossEntropySaved saved;
    const float loss =
        llmcc::cross_entropy_fwd(view(logits), tokens_for(logits, targets), to_int(op, "vocab_size", vocab_size),
                                 static_cast<int>(ignore_index), saved);
    return Tensor2{at::scalar_tensor(loss, at::kFloat), outputs(saved.lse)};
  });
}

// -> d_logits (logits' shape)
at::Tensor cross_entropy_backward(const at::Tensor& d_loss_in, const at::Tensor& logits_in,
                                  const at::Tensor& targets_in, const at::Tensor& lse_in, std::int64_t vocab_size,
                                  std::int64_t ignore_index) {
  const char* op = "cross_entropy_backward";
  const at::Tensor d_loss = checked_float(op, "d_loss", d_loss_in, 0, 0);
  const at::Tensor logits = checked_float(op, "logits", logits_in, 2, 3);
  const at::Tensor targets = checked_targets(op, "targets", targets_in);
  const at::Tensor lse = checked_float(op, "lse", lse_in, 1, 1);
  return run([&] {
    TorchOutputs working;  // some pullbacks take working memory from the arena
    const llmcc::Tokens tokens = tokens_for(logits, targets);
    llmcc::CrossEntropySaved saved{view(lse), 0};
    for (std::int64_t i = 0; i < tokens.numel(); ++i) saved.count += tokens.data()[i] != ignore_index;
    Adjoint d_logits = pending_adjoint(logits.sizes());
    llmcc::cross_entropy_pullback(view(logits), tokens, to_int(op, "vocab_size", vocab_size),
                                  static_cast<int>(ignore_index), 0.0f, saved, d_loss.item<float>(), &d_logits.handle);
    settle(d_logits);
    return d_logits.torch;
  });
}

}  // namespace

TORCH_LIBRARY(llmcc, m) {
  m.def("attention(Tensor q, Tensor k, Tensor v, int n_head, int n_kv_head) -> (Tensor, Tensor)");
  m.def(
      "attention_backward(Tensor d_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, int n_head, "
      "int n_kv_head) -> (Tensor, Tensor, Tensor)");
  m.def("attention_qkv(Tensor qkv, int n_head, int n_kv_head) -> (Tensor, Tensor)");
  m.def(
      "attention_qkv_backward(Tensor d_out, Tensor qkv, Tensor out, Tensor lse, int n_head, int n_kv_head) "
      "-> Tensor");
  m.def("linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
  m.def("linear_backward(Tensor d_out, Tensor x, Tensor weight, Tensor? bias) -> (Tensor, Tensor, Tensor)");
  m.def("layernorm(Tensor x, Tensor weight, Tensor bias) -> (Tensor, Tensor, Tensor)");
  m.def(
      "layernorm_backward(Tensor d_out, Tensor x, Tensor weight, Tensor bias, Tensor mean, Tensor rstd) "
      "-> (Tensor, Tensor, Tensor)");
  m.def("rmsnorm(Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)");
  m.def("rmsnorm_backward(Tensor d_out, Tensor x, Tensor weight, Tensor rstd, float eps) -> (Tensor, Tensor)");
  m.def("gelu(Tensor x) -> Tensor");
  m.def("gelu_backward(Tensor d_out, Tensor x) -> Tensor");
  m.def("silu(Tensor x) -> Tensor");
  m.def("silu_backward(Tensor d_out, Tensor x) -> Tensor");
  m.def("rope(Tensor x, int n_head, float theta, int pos_offset) -> Tensor");
  m.def("rope_backward(Tensor d_out, int n_head, float theta, int pos_offset) -> Tensor");
  m.def("cross_entropy(Tensor logits, Tensor targets, int vocab_size, int ignore_index) -> (Tensor, Tensor)");
  m.def(
      "cross_entropy_backward(Tensor d_loss, Tensor logits, Tensor targets, Tensor lse, int vocab_size, "
      "int ignore_index) -> Tensor");
}

TORCH_LIBRARY_IMPL(llmcc, CPU, m) {
  m.impl("attention", &attention);
  m.impl("attention_backward", &attention_backward);
  m.impl("attention_qkv", &attention_qkv);
  m.impl("attention_qkv_backward", &attention_qkv_backward);
  m.impl("linear", &linear);
  m.impl("linear_backward", &linear_backward);
  m.impl("layernorm", &layernorm);
  m.impl("layernorm_backward", &layernorm_backward);
  m.impl("rmsnorm", &rmsnorm);
  m.impl("rmsnorm_backward", &rmsnorm_backward);
  m.impl("gelu", &gelu);
  m.impl("gelu_backward", &gelu_backward);
  m.impl("silu", &silu);
  m.impl("silu_backward", &silu_backward);
  m.impl("rope", &rope);
  m.impl("rope_backward", &rope_backward);
  m.impl("cross_entropy", &cross_entropy);
  m.impl("cross_entropy_backward", &cross_entropy_backward);
}

}  // namespace llmcc_torch
