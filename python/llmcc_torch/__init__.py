"""llmcc inside PyTorch: llmcc's CPU float32 kernels as `torch.ops.llmcc` operators with autograd
formulas that call llmcc's pullbacks, and whole transformer blocks whose backward is the one
adgen generated from llmcc's forward code.

    import llmcc_torch
    y = llmcc_torch.attention_qkv(qkv, n_head=12)            # an op (autograd, torch.compile)
    block = llmcc_torch.Gpt2Block(n_embd=768, n_head=12)     # a module (nn.Parameters)

Threads: llmcc's kernels use torch's thread count (torch.set_num_threads).
"""
import torch

from . import _C  # noqa: F401  registers torch.ops.llmcc.*
from .modules import Gpt2Block, LlamaBlock
from .optim import AdamW
from .ops import (attention, attention_qkv, cross_entropy, gelu, layernorm, linear, rmsnorm, rope, silu)

__all__ = [
    "attention", "attention_qkv", "cross_entropy", "gelu", "layernorm", "linear", "rmsnorm", "rope", "silu", "Gpt2Block",
    "LlamaBlock", "AdamW", "matmul_kernel_name"
]


def matmul_kernel_name() -> str:
    """The GEMM micro-kernel llmcc's linear layers use on this CPU."""
    return _C.matmul_kernel_name()
