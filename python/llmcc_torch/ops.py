"""llmcc's ops for PyTorch: Python entry points, the autograd formula of every `torch.ops.llmcc`
operator (its backward is the llmcc pullback, a `*_backward` operator) and the fake kernels that
let torch.compile trace the operators as opaque calls.

Every op takes and returns CPU float32 tensors (shapes as in include/llmcc/ops/*.h); non-contiguous
inputs are copied to contiguous ones; other devices and dtypes raise with llmcc's message.
"""
from typing import Optional

import torch

from ._checks import check_float, check_targets

ops = torch.ops.llmcc
lib = "llmcc::"


def _heads(n_head: int, n_kv_head: Optional[int]) -> tuple:
    return int(n_head), int(n_head if n_kv_head is None else n_kv_head)


# ---- attention ---------------------------------------------------------------------------

def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_head: int,
              n_kv_head: Optional[int] = None) -> torch.Tensor:
    """Causal multi-head self-attention with grouped-query heads, scores scaled by 1/sqrt(HS).

    q (B, T, n_head * HS); k, v (B, T, n_kv_head * HS) -> (B, T, n_head * HS). Query head h reads
    key/value head h // (n_head // n_kv_head); n_kv_head defaults to n_head. Heads are contiguous
    HS-wide slices of the last dim (as q.view(B, T, n_head, HS)). The same math as
    F.scaled_dot_product_attention(..., is_causal=True, enable_gqa=True) on (B, heads, T, HS)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float("attention", name, t, 3, 3)
    return ops.attention(q, k, v, *_heads(n_head, n_kv_head))[0]


def attention_qkv(qkv: torch.Tensor, n_head: int, n_kv_head: Optional[int] = None) -> torch.Tensor:
    """attention on q, k, v packed in one tensor, as a fused qkv projection makes it:
    qkv (B, T, (n_head + 2 n_kv_head) * HS), each row [n_head query heads | n_kv_head key heads |
    n_kv_head value heads] -> (B, T, n_head * HS). GPT-2's c_attn output is this with n_kv_head = n_head."""
    check_float("attention_qkv", "qkv", qkv, 3, 3)
    return ops.attention_qkv(qkv, *_heads(n_head, n_kv_head))[0]


@torch.library.register_fake(lib + "attention")
def _(q, k, v, n_head, n_kv_head):
    return q.new_empty(q.shape), q.new_empty((q.shape[0], n_head, q.shape[1]))


@torch.library.register_fake(lib + "attention_backward")
def _(d_out, q, k, v, out, lse, n_head, n_kv_head):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _attention_setup(ctx, inputs, output):
    q, k, v, n_head, n_kv_head = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.heads = (n_head, n_kv_head)


def _attention_backward(ctx, d_out, _d_lse):
    q, k, v, out, lse = ctx.saved_tensors
    d_q, d_k, d_v = ops.attention_backward(d_out, q, k, v, out, lse, *ctx.heads)
    return d_q, d_k, d_v, None, None


torch.library.register_autograd(lib + "attention", _attention_backward, setup_context=_attention_setup)


@torch.library.register_fake(lib + "attention_qkv")
def _(qkv, n_head, n_kv_head):
    B, T, W = qkv.shape
    hs = W // (n_head + 2 * n_kv_head)
    return qkv.new_empty((B, T, n_head * hs)), qkv.new_empty((B, n_head, T))


@torch.library.register_fake(lib + "attention_qkv_backward")
def _(d_out, qkv, out, lse, n_head, n_kv_head):
    return qkv.new_empty(qkv.shape)


def _attention_qkv_setup(ctx, inputs, output):
    qkv, n_head, n_kv_head = inputs
    out, lse = output
    ctx.save_for_backward(qkv, out, lse)
    ctx.heads = (n_head, n_kv_head)


def _attention_qkv_backward(ctx, d_out, _d_lse):
    qkv, out, lse = ctx.saved_tensors
    return ops.attention_qkv_backward(d_out, qkv, out, lse, *ctx.heads), None, None


torch.library.register_autograd(lib + "attention_qkv", _attention_qkv_backward, setup_context=_attention_qkv_setup)

# ---- linear ------------------------------------------------------------------------------


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """F.linear on llmcc's GEMM: x @ weight^T (+ bias). x (N, C) or (B, T, C); weight (OC, C), as
    nn.Linear stores it; bias (OC) or None. A tied LM head is linear(x, wte)."""
    check_float("linear", "x", x, 2, 3)
    check_float("linear", "weight", weight, 2, 2)
    if bias is not None:
        check_float("linear", "bias", bias, 1, 1)
    return ops.linear(x, weight, bias)


@torch.library.register_fake(lib + "linear")
def _(x, weight, bias):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@torch.library.register_fake(lib + "linear_backward")
def _(d_out, x, weight, bias):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(
        bias.shape if bias is not None else (0,))


def _linear_setup(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight, bias)


def _linear_backward(ctx, d_out):
    x, weight, bias = ctx.saved_tensors
    d_x, d_w, d_b = ops.linear_backward(d_out, x, weight, bias)
    return d_x, d_w, (d_b if bias is not None else None)


torch.library.register_autograd(lib + "linear", _linear_backward, setup_context=_linear_setup)

# ---- layernorm, rmsnorm ------------------------------------------------------------------


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """(x - mean) / sqrt(var + 1e-5) * weight + bias over the last dim (GPT-2's LayerNorm, eps 1e-5).
    x (N, C) or (B, T, C); weight, bias (C)."""
    check_float("layernorm", "x", x, 2, 3)
    check_float("layernorm", "weight", weight, 1, 1)
    check_float("layernorm", "bias", bias, 1, 1)
    return ops.layernorm(x, weight, bias)[0]


@torch.library.register_fake(lib + "layernorm")
def _(x, weight, bias):
    n = x.numel() // x.shape[-1]
    return x.new_empty(x.shape), x.new_empty((n,)), x.new_empty((n,))


@torch.library.register_fake(lib + "layernorm_backward")
def _(d_out, x, weight, bias, mean, rstd):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), bias.new_empty(bias.shape)


def _layernorm_setup(ctx, inputs, output):
    x, weight, bias = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, bias, mean, rstd)


def _layernorm_backward(ctx, d_out, _d_mean, _d_rstd):
    return ops.layernorm_backward(d_out, *ctx.saved_tensors)


torch.library.register_autograd(lib + "layernorm", _layernorm_backward, setup_context=_layernorm_setup)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last dim (Llama's RMSNorm).
    x (N, C) or (B, T, C); weight (C)."""
    check_float("rmsnorm", "x", x, 2, 3)
    check_float("rmsnorm", "weight", weight, 1, 1)
    return ops.rmsnorm(x, weight, float(eps))[0]


@torch.library.register_fake(lib + "rmsnorm")
def _(x, weight, eps):
    return x.new_empty(x.shape), x.new_empty((x.numel() // x.shape[-1],))


@torch.library.register_fake(lib + "rmsnorm_backward")
def _(d_out, x, weight, rstd, eps):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


def _rmsnorm_setup(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.eps = eps


def _rmsnorm_backward(ctx, d_out, _d_rstd):
    x, weight, rstd = ctx.saved_tensors
    d_x, d_w = ops.rmsnorm_backward(d_out, x, weight, rstd, ctx.eps)
    return d_x, d_w, None


torch.library.register_autograd(lib + "rmsnorm", _rmsnorm_backward, setup_context=_rmsnorm_setup)

# ---- gelu, silu, rope --------------------------------------------------------------------


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's GELU, the tanh approximation (F.gelu(x, approximate="tanh")). x: 1 to 4 dims."""
    check_float("gelu", "x", x, 1, 4)
    return ops.gelu(x)


def silu(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(x) (F.silu). x: 1 to 4 dims."""
    check_float("silu", "x", x, 1, 4)
    return ops.silu(x)


for _name in ("gelu", "silu"):
    torch.library.register_fake(lib + _name)(lambda x: x.new_empty(x.shape))
    torch.library.register_fake(lib + _name + "_backward")(lambda d_out, x: x.new_empty(x.shape))


def _unary_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _gelu_backward(ctx, d_out):
    return ops.gelu_backward(d_out, ctx.saved_tensors[0])


def _silu_backward(ctx, d_out):
    return ops.silu_backward(d_out, ctx.saved_tensors[0])


torch.library.register_autograd(lib + "gelu", _gelu_backward, setup_context=_unary_setup)
torch.library.register_autograd(lib + "silu", _silu_backward, setup_context=_unary_setup)


def rope(x: torch.Tensor, n_head: int, theta: float = 10000.0, pos_offset: int = 0) -> torch.Tensor:
    """Rotary position embedding, Meta's Llama convention: within each head the pairs
    (x[2i], x[2i+1]) rotate by (pos_offset + t) * theta^(-2i/HS). x (B, T, n_head * HS), HS even."""
    check_float("rope", "x", x, 3, 3)
    return ops.rope(x, int(n_head), float(theta), int(pos_offset))


@torch.library.register_fake(lib + "rope")
def _(x, n_head, theta, pos_offset):
    return x.new_empty(x.shape)


@torch.library.register_fake(lib + "rope_backward")
def _(d_out, n_head, theta, pos_offset):
    return d_out.new_empty(d_out.shape)


def _rope_setup(ctx, inputs, output):
    ctx.args = inputs[1:]


def _rope_backward(ctx, d_out):
    return ops.rope_backward(d_out, *ctx.args), None, None, None


torch.library.register_autograd(lib + "rope", _rope_backward, setup_context=_rope_setup)

# ---- fused softmax + cross-entropy -------------------------------------------------------


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100,
                  vocab_size: Optional[int] = None) -> torch.Tensor:
    """Mean cross-entropy of softmax(logits) against targets, fused (the probabilities are never
    stored). logits (N, Vp) with targets (N), or (B, T, Vp) with targets (B, T); only the first
    vocab_size columns are classes (default all: padded vocabularies pass the real size). Targets
    equal to ignore_index are left out of the mean; when all are, the loss is 0 (PyTorch: NaN)."""
    check_float("cross_entropy", "logits", logits, 2, 3)
    check_targets("cross_entropy", "targets", targets)
    V = logits.shape[-1] if vocab_size is None else int(vocab_size)
    return ops.cross_entropy(logits, targets, V, int(ignore_index))[0]


@torch.library.register_fake(lib + "cross_entropy")
def _(logits, targets, vocab_size, ignore_index):
    return logits.new_empty(()), logits.new_empty((logits.numel() // logits.shape[-1],))


@torch.library.register_fake(lib + "cross_entropy_backward")
def _(d_loss, logits, targets, lse, vocab_size, ignore_index):
    return logits.new_empty(logits.shape)


def _cross_entropy_setup(ctx, inputs, output):
    logits, targets, vocab_size, ignore_index = inputs
    ctx.save_for_backward(logits, targets, output[1])
    ctx.args = (vocab_size, ignore_index)


def _cross_entropy_backward(ctx, d_loss, _d_lse):
    logits, targets, lse = ctx.saved_tensors
    return ops.cross_entropy_backward(d_loss, logits, targets, lse, *ctx.args), None, None, None


torch.library.register_autograd(lib + "cross_entropy", _cross_entropy_backward, setup_context=_cross_entropy_setup)
