"""Whole transformer blocks as torch.nn.Modules. The forward runs llmcc's block forward; the
backward runs the backward adgen generated from that forward code, in one call, from the record
the forward kept (llmcc memory, freed after the backward). Parameters are ordinary
nn.Parameters under nanoGPT's / Meta's names, so state_dicts load either way and any PyTorch
optimizer updates them.

A block's backward runs once per forward: a second backward through the same graph (even with
retain_graph=True) raises, because the record's memory went back to llmcc after the first.
"""
import math

import torch
from torch import nn

from . import _C
from ._checks import check_float


def _add_parameters(module: nn.Module, names_and_shapes) -> list:
    """Creates every parameter under its dotted name (plain submodules along the path), in llmcc's
    order; returns the names."""
    names = []
    for name, shape in names_and_shapes:
        *path, leaf = name.split(".")
        owner = module
        for part in path:
            if not hasattr(owner, part):
                owner.add_module(part, nn.Module())
            owner = getattr(owner, part)
        owner.register_parameter(leaf, nn.Parameter(torch.empty(shape)))
        names.append(name)
    return names


class _BlockFunction(torch.autograd.Function):
    """forward(ctx, block, x, *params): y; backward: d_x and every parameter's gradient."""

    @staticmethod
    def forward(ctx, block, x, *params):
        y, record = block._forward(x, list(params))
        ctx.block, ctx.record = block, record
        ctx.save_for_backward(x, *params)
        return y

    @staticmethod
    def backward(ctx, d_y):
        x, *params = ctx.saved_tensors
        record, ctx.record = ctx.record, None
        if record is None:
            raise RuntimeError(f"[{type(ctx.block).__name__} backward] this forward's record was used by an earlier "
                               "backward; a block's backward runs once per forward")
        d_x, d_params = ctx.block._backward(record, x, list(params), d_y)
        return (None, d_x, *d_params)


@torch.compiler.disable
def _run_block(block, x, params):
    """The block call: opaque to torch.compile (a graph break; the code around it still compiles)."""
    if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
        return _BlockFunction.apply(block, x, *params)
    return block._forward(x, params)[0]


class _Block(nn.Module):

    def _parameters_in_order(self):
        return [self.get_parameter(n) for n in self._names]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_float(type(self).__name__, "x", x, 3, 3)
        if x.shape[-1] != self._width:
            raise ValueError(f"[{type(self).__name__}] x has shape {tuple(x.shape)}, expected (B, T, {self._width})")
        return _run_block(self, x, self._parameters_in_order())


class Gpt2Block(_Block):
    """GPT-2's pre-LN block (nanoGPT's Block with tanh GELU):
    h = x + attn(ln_1(x)); y = h + mlp(ln_2(h)), causal attention over n_head heads.
    x, y: (B, T, n_embd). Parameters (nanoGPT's names): ln_1.{weight,bias}, attn.c_attn.{weight
    (3C, C), bias}, attn.c_proj.{weight (C, C), bias}, ln_2.{weight,bias}, mlp.c_fc.{weight (4C, C),
    bias}, mlp.c_proj.{weight (C, 4C), bias}."""

    def __init__(self, n_embd: int, n_head: int, n_layer: int = 1):
        super().__init__()
        self.n_embd, self.n_head = int(n_embd), int(n_head)
        self._width = self.n_embd
        self._names = _add_parameters(self, _C.gpt2_block_parameters(self.n_embd, self.n_head))
        self.reset_parameters(n_layer)

    def reset_parameters(self, n_layer: int = 1) -> None:
        """GPT-2's initialisation: weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2 n_layer)),
        biases 0, layernorm weights 1."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif name.startswith("ln_"):
                    p.fill_(1.0)
                else:
                    std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                    p.normal_(0.0, std)

    def _forward(self, x, params):
        return _C.gpt2_block_forward(x, params, self.n_head)

    def _backward(self, record, x, params, d_y):
        return _C.gpt2_block_backward(record, x, params, self.n_head, d_y)

    def extra_repr(self) -> str:
        return f"n_embd={self.n_embd}, n_head={self.n_head}"


class LlamaBlock(_Block):
    """Llama's block: h = x + attention(attention_norm(x)); y = h + feed_forward(ffn_norm(h)), RMSNorm,
    RoPE (Meta's interleaved pairs, base rope_theta) on queries and keys, causal grouped-query
    attention (n_kv_head key/value heads), SwiGLU w2(silu(w1 x) * w3 x). No biases.
    x, y: (B, T, dim). Parameters (Meta's names): attention_norm.weight, attention.{wq, wk, wv, wo}.weight,
    ffn_norm.weight, feed_forward.{w1, w2, w3}.weight."""

    def __init__(self, dim: int, n_head: int, n_kv_head: int, hidden_dim: int, eps: float = 1e-5,
                 rope_theta: float = 10000.0):
        super().__init__()
        self.dim, self.n_head, self.n_kv_head, self.hidden_dim = int(dim), int(n_head), int(n_kv_head), int(hidden_dim)
        self.eps, self.rope_theta = float(eps), float(rope_theta)
        self._width = self.dim
        self._names = _add_parameters(
            self, _C.llama_block_parameters(self.dim, self.n_head, self.n_kv_head, self.hidden_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Norm weights 1, every matrix N(0, 0.02)."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.fill_(1.0) if "norm" in name else p.normal_(0.0, 0.02)

    def _config(self):
        return self.n_head, self.n_kv_head, self.hidden_dim, self.eps, self.rope_theta

    def _forward(self, x, params):
        return _C.llama_block_forward(x, params, *self._config())

    def _backward(self, record, x, params, d_y):
        return _C.llama_block_backward(record, x, params, *self._config(), d_y)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, n_head={self.n_head}, n_kv_head={self.n_kv_head}, hidden_dim={self.hidden_dim}, "
                f"eps={self.eps}, rope_theta={self.rope_theta}")
