"""Pure-PyTorch implementations of the math llmcc's ops and blocks compute, written from
PyTorch's own functions: what the tests compare llmcc_torch against (run in float64 there) and
what bench/torch_ext.py times llmcc_torch against (in float32)."""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def attention(q, k, v, n_head, n_kv_head):
    """Causal GQA attention through F.scaled_dot_product_attention; (B, T, heads * HS) layouts."""
    B, T, _ = q.shape
    hs = q.shape[-1] // n_head
    Q = q.view(B, T, n_head, hs).transpose(1, 2)
    K = k.view(B, T, n_kv_head, hs).transpose(1, 2)
    V = v.view(B, T, n_kv_head, hs).transpose(1, 2)
    y = F.scaled_dot_product_attention(Q, K, V, is_causal=True, enable_gqa=n_head != n_kv_head)
    return y.transpose(1, 2).reshape(B, T, n_head * hs)


def attention_math(q, k, v, n_head):
    """Causal multi-head attention written out (softmax of masked scores), as eager code would be."""
    B, T, C = q.shape
    hs = C // n_head
    Q, K, V = (t.view(B, T, n_head, hs).transpose(1, 2) for t in (q, k, v))
    att = (Q @ K.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (att @ V).transpose(1, 2).reshape(B, T, C)


def split_qkv(qkv, n_head, n_kv_head):
    hs = qkv.shape[-1] // (n_head + 2 * n_kv_head)
    return qkv.split([n_head * hs, n_kv_head * hs, n_kv_head * hs], dim=-1)


def rope(x, n_head, theta, pos_offset):
    """Meta's Llama RoPE: complex rotation of the interleaved pairs of every head."""
    B, T, C = x.shape
    hs = C // n_head
    inv_freq = 1.0 / (theta**(torch.arange(0, hs, 2, dtype=torch.float64) / hs))
    angles = torch.outer(torch.arange(pos_offset, pos_offset + T, dtype=torch.float64), inv_freq)
    cis = torch.polar(torch.ones_like(angles), angles).to(torch.complex128 if x.dtype == torch.float64 else
                                                          torch.complex64)
    xc = torch.view_as_complex(x.reshape(B, T, n_head, hs // 2, 2).contiguous())
    return torch.view_as_real(xc * cis[None, :, None, :]).reshape(B, T, C)


# ---- nanoGPT-style GPT-2 -------------------------------------------------------------------


class CausalSelfAttention(nn.Module):

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(x.shape[-1], dim=2)
        return self.c_proj(attention(q, k, v, self.n_head, self.n_head))


class Mlp(nn.Module):

    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """nanoGPT's Block with GPT-2's tanh GELU."""

    def __init__(self, n_embd, n_head, n_layer=1):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = Mlp(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


@dataclass
class GptConfig:
    vocab_size: int = 50304
    block_size: int = 1024
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768


class Gpt(nn.Module):
    """nanoGPT's GPT (no dropout; the LM head tied to wte). `block` makes each block:
    reference.Block for pure PyTorch, llmcc_torch.Gpt2Block for llmcc's. loss_fn(logits, targets)
    defaults to F.cross_entropy; head(x, weight) computes the logits (default F.linear)."""

    def __init__(self, cfg: GptConfig, block=Block, loss_fn=None, head=F.linear):
        super().__init__()
        self.cfg = cfg
        self.head = head
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.h = nn.ModuleList([block(cfg.n_embd, cfg.n_head, cfg.n_layer) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        self.loss_fn = loss_fn or (lambda logits, y: F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)))
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        return self.loss_fn(self.head(self.ln_f(x), self.lm_head.weight), targets)


# ---- Llama block (Meta's reference layout) -------------------------------------------------


class LlamaBlock(nn.Module):

    def __init__(self, dim, n_head, n_kv_head, hidden_dim, eps=1e-5, rope_theta=10000.0):
        super().__init__()
        self.n_head, self.n_kv_head, self.eps, self.theta = n_head, n_kv_head, eps, rope_theta
        hs = dim // n_head
        self.attention_norm = nn.RMSNorm(dim, eps=eps)
        self.attention = nn.Module()
        self.attention.wq = nn.Linear(dim, n_head * hs, bias=False)
        self.attention.wk = nn.Linear(dim, n_kv_head * hs, bias=False)
        self.attention.wv = nn.Linear(dim, n_kv_head * hs, bias=False)
        self.attention.wo = nn.Linear(n_head * hs, dim, bias=False)
        self.ffn_norm = nn.RMSNorm(dim, eps=eps)
        self.feed_forward = nn.Module()
        self.feed_forward.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.feed_forward.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.feed_forward.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        a, f = self.attention, self.feed_forward
        h_in = self.attention_norm(x)
        q = rope(a.wq(h_in), self.n_head, self.theta, 0)
        k = rope(a.wk(h_in), self.n_kv_head, self.theta, 0)
        h = x + a.wo(attention(q, k, a.wv(h_in), self.n_head, self.n_kv_head))
        g = self.ffn_norm(h)
        return h + f.w2(F.silu(f.w1(g)) * f.w3(g))
