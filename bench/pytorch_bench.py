#!/usr/bin/env python3
"""GPT-2 and Llama training-step speed in PyTorch on CPU: the peer of `llmcc bench`.

The same models as src/models/gpt2/gpt2.h (GPT-2 with the padded vocabulary 50304, LM head tied to the
token embedding, tanh GELU, pre-LN blocks) and src/models/llama/llama.h (RMSNorm, RoPE on pairs
(x[2i], x[2i+1]), grouped-query attention, SwiGLU, untied LM head; --model llama-tiny,
stories15m, stories42m, stories110m), the same batch (one fixed batch of random
tokens, targets shifted by one), the same optimizer (AdamW, betas 0.9/0.95, eps 1e-8, weight
decay 0.1 on 2-D tensors, lr 3e-4, the gradient's norm clipped to 1 as `llmcc train` and nanoGPT
do) and the same thread count. Runs warm-up steps, then timed steps of zero_grad + forward +
backward + clipping + AdamW, and prints median/min ms per step, tokens/s and
peak RSS, ending with a "result: key=value ..." line like llmcc bench's (bench/compare.sh reads
it).

  build/venv-torch/bin/python3 bench/pytorch_bench.py --model gpt2 --batch-size 4 --seq-len 64 --threads 2
  ... --mode compile    torch.compile (inductor; PyTorch 2.x; Debian's 1.13 has none: reported, exit 2)
  ... --dtype bf16      mixed precision as PyTorch offers it on CPU: forward and loss under
                        torch.autocast("cpu", dtype=torch.bfloat16) (bf16 matmuls in oneDNN,
                        fp32 weights, gradients and AdamW), the peer of `llmcc bench --dtype bf16`
  ... --describe        one line: torch version, GEMM library, oneDNN, CPU capability; then exit

bench/setup_pytorch.sh makes build/venv-torch (PyTorch 2.x from PyPI); Debian's python3-torch
1.13 (/usr/bin/python3) works too.

PyTorch's fast paths, as nanoGPT: q, k and v are one (3C, C) linear (c_attn); attention is
F.scaled_dot_product_attention(is_causal=True) when PyTorch has it (2.x), else the explicit
masked softmax (1.13); Llama's RMSNorm is F.rms_norm where PyTorch has it (2.4 and later) and its
grouped-query attention sdpa's enable_gqa (2.5 and later), else the key/value heads repeated; AdamW is PyTorch's fused CPU kernel when it has one (2.4 and later: one
pass over memory, as llmcc's; --adamw picks foreach or loop instead), else its default (a loop
over tensors). The
first warm-up step of --mode compile compiles the model (minutes on two busy cores; inductor
caches the result in /tmp/torchinductor_$USER, so later runs start faster); its peak RSS
includes the compiler's.
"""
import argparse
import math
import re
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # name: (n_layer, n_head, n_embd, max_seq_len), as src/models/gpt2/gpt2_config.cpp
    "gpt2": (12, 12, 768, 1024),
    "gpt2-medium": (24, 16, 1024, 1024),
    "gpt2-large": (36, 20, 1280, 1024),
    "gpt2-xl": (48, 25, 1600, 1024),
    "gpt2-tiny": (4, 4, 128, 256),
    "gpt2-mini": (6, 6, 384, 256),
}
VOCAB, PADDED_VOCAB = 50257, 50304
# name: (n_layer, n_head, n_kv_head, n_embd, hidden_dim, max_seq_len, vocab), as
# src/models/llama/llama_config.cpp
LLAMA_PRESETS = {
    "llama-tiny": (4, 4, 2, 128, 352, 256, 32000),
    "stories15m": (6, 6, 6, 288, 768, 256, 32000),
    "stories42m": (8, 8, 8, 512, 1376, 1024, 32000),
    "stories110m": (12, 12, 12, 768, 2048, 1024, 32000),
}


class Block(nn.Module):
    def __init__(self, C, NH, T_max):
        super().__init__()
        self.NH = NH
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.fused = hasattr(F, "scaled_dot_product_attention")
        if not self.fused:
            self.register_buffer("mask", torch.tril(torch.ones(T_max, T_max, dtype=torch.bool)), persistent=False)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.NH, C // self.NH).transpose(1, 2)  # (B, NH, T, HS)
        k = k.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        v = v.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, NH, T, T)
            att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L, NH, C, T_max):
        super().__init__()
        self.wte = nn.Embedding(PADDED_VOCAB, C)
        self.wpe = nn.Embedding(T_max, C)
        self.h = nn.ModuleList([Block(C, NH, T_max) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        # GPT-2 initialisation (as gpt2_init): N(0, 0.02), residual projections / sqrt(2L).
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        with torch.no_grad():
            self.wte.weight[VOCAB:].zero_()

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # (B, T, Vp): the tied head
        # Like llmcc's cross_entropy: softmax over the real vocabulary only.
        return F.cross_entropy(logits[..., :VOCAB].reshape(-1, VOCAB), targets.reshape(-1))


def rms_norm(x, w, eps=1e-5):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.size(-1),), w, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):
    """Rotates the pairs (x[..., 2i], x[..., 2i + 1]) of x (B, H, T, HS) by position: cos, sin (T, HS / 2)."""
    x0, x1 = x.unflatten(-1, (-1, 2)).unbind(-1)
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class LlamaBlock(nn.Module):
    def __init__(self, C, NH, NKV, F_hidden):
        super().__init__()
        self.NH, self.NKV, self.HS = NH, NKV, C // NH
        self.attention_norm = nn.Parameter(torch.ones(C))
        self.wq = nn.Linear(C, NH * self.HS, bias=False)
        self.wk = nn.Linear(C, NKV * self.HS, bias=False)
        self.wv = nn.Linear(C, NKV * self.HS, bias=False)
        self.wo = nn.Linear(NH * self.HS, C, bias=False)
        self.ffn_norm = nn.Parameter(torch.ones(C))
        self.w1 = nn.Linear(C, F_hidden, bias=False)
        self.w2 = nn.Linear(F_hidden, C, bias=False)
        self.w3 = nn.Linear(C, F_hidden, bias=False)

    def attn(self, x, cos, sin):
        B, T, C = x.shape
        q = rope(self.wq(x).view(B, T, self.NH, self.HS).transpose(1, 2), cos, sin)  # (B, NH, T, HS)
        k = rope(self.wk(x).view(B, T, self.NKV, self.HS).transpose(1, 2), cos, sin)  # (B, NKV, T, HS)
        v = self.wv(x).view(B, T, self.NKV, self.HS).transpose(1, 2)
        if self.NKV != self.NH:
            try:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            except TypeError:
                rep_ = self.NH // self.NKV
                y = F.scaled_dot_product_attention(q, k.repeat_interleave(rep_, 1), v.repeat_interleave(rep_, 1),
                                                   is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x, cos, sin):
        h = x + self.attn(rms_norm(x, self.attention_norm), cos, sin)
        g = rms_norm(h, self.ffn_norm)
        return h + self.w2(F.silu(self.w1(g)) * self.w3(g))


class Llama(nn.Module):
    def __init__(self, L, NH, NKV, C, F_hidden, T_max, V, theta=10000.0):
        super().__init__()
        self.V = V
        self.tok_embeddings = nn.Embedding(V, C)
        self.layers = nn.ModuleList([LlamaBlock(C, NH, NKV, F_hidden) for _ in range(L)])
        self.norm = nn.Parameter(torch.ones(C))
        self.output = nn.Linear(C, V, bias=False)
        HS = C // NH
        freqs = theta ** (-torch.arange(0, HS, 2, dtype=torch.float32) / HS)  # (HS / 2)
        angles = torch.outer(torch.arange(T_max, dtype=torch.float32), freqs)  # (T_max, HS / 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        # As llama_init: N(0, 0.02), the residual projections (wo, w2) / sqrt(2L); norms 1.
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("wo.weight", "w2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.tok_embeddings(idx)
        cos, sin = self.cos[:T], self.sin[:T]
        for block in self.layers:
            x = block(x, cos, sin)
        logits = self.output(rms_norm(x, self.norm))  # (B, T, V)
        return F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))


def describe():
    """One line: torch version and where it runs a CPU step (from torch.__config__.show())."""
    cfg = torch.__config__.show()
    lines = [line.strip(" -") for line in cfg.splitlines()]
    mkl = [line.split("Version ")[1].split("-")[0] for line in lines if "Math Kernel Library" in line and "Version " in line]
    dnnl = [line.split()[2] for line in lines if line.startswith("Intel(R) MKL-DNN") and len(line.split()) > 2]
    cap = [line.split(": ", 1)[1] for line in lines if line.startswith("CPU capability usage")]
    blas = re.search(r"BLAS_INFO=(\w+)", cfg)
    torch.ones(8, 8) @ torch.ones(8, 8)  # loads the BLAS library if it is a separate one (Debian's)
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({line.split()[-1] for line in f if re.search(r"/lib(open)?blas|/libblis|/libmkl", line)})
    except OSError:
        libs = []
    return (f"torch {torch.__version__} (in {sys.prefix}): GEMM via BLAS_INFO={blas.group(1) if blas else '?'}"
            + (f" (MKL {mkl[0]})" if mkl else "") + (f" ({', '.join(libs)})" if libs else "")
            + f", oneDNN {dnnl[0] if dnnl else 'none'}"
            + f", CPU capability {cap[0] if cap else '?'}")


def make_adamw(model, impl):
    """AdamW as llmcc's (betas 0.9/0.95, eps 1e-8, decay 0.1 on 2-D tensors, lr 3e-4).

    impl: auto = fused if this PyTorch has a fused CPU AdamW, else its default. Returns the
    optimizer and the implementation's name."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    if impl in ("auto", "fused"):
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "fused"
        except (TypeError, RuntimeError) as e:
            if impl == "fused":
                sys.exit(f"pytorch_bench.py: --adamw fused: PyTorch {torch.__version__} has no fused CPU AdamW ({e})")
        return torch.optim.AdamW(groups, **kw), "default"
    return torch.optim.AdamW(groups, foreach=(impl == "foreach"), **kw), impl


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt2", choices=sorted(PRESETS) + sorted(LLAMA_PRESETS))
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    ap.add_argument("--adamw", choices=["auto", "fused", "foreach", "loop"], default="auto",
                    help="AdamW implementation (auto: fused when this PyTorch has it on CPU, else its default)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--describe", action="store_true", help="print torch's version and CPU backends, then exit")
    args = ap.parse_args()
    if args.describe:
        print(describe())
        return

    llama = args.model in LLAMA_PRESETS
    if llama:
        L, NH, NKV, C, F_hidden, T_max, vocab = LLAMA_PRESETS[args.model]
    else:
        (L, NH, C, T_max), vocab = PRESETS[args.model], VOCAB
    B, T = args.batch_size, args.seq_len
    if not 1 <= T <= T_max:
        sys.exit(f"pytorch_bench.py: --seq-len must be in [1, {T_max}] for {args.model}, got {T}")
    if args.mode == "compile" and not hasattr(torch, "compile"):
        print(f"pytorch_bench.py: torch.compile is not available in PyTorch {torch.__version__} "
              "(it needs 2.0 or later)", file=sys.stderr)
        sys.exit(2)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = Llama(L, NH, NKV, C, F_hidden, T_max, vocab) if llama else GPT2(L, NH, C, T_max)
    opt, adamw = make_adamw(model, args.adamw)
    step_model = torch.compile(model) if args.mode == "compile" else model
    stream = torch.randint(0, vocab, (B * T + 1,), dtype=torch.long)
    x, y = stream[:-1].view(B, T), stream[1:].view(B, T)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.dtype == "bf16"):
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    n_params = sum(p.numel() for p in model.parameters())
    attention = "sdpa" if llama or model.h[0].fused else "explicit"
    print(f"pytorch_bench.py: {args.model} (L{L} H{NH} C{C}), {n_params / 1e6:.2f}M parameters, B={B} T={T}, "
          f"{args.threads} threads, PyTorch {torch.__version__}, {args.mode}, {args.dtype}, "
          f"attention {attention}, AdamW {adamw}")
    print(describe())
    first = None
    for _ in range(args.warmup):
        loss = step()
        first = loss if first is None else first
    ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        ms.append(1e3 * (time.perf_counter() - t0))
        first = loss if first is None else first
    med, best = statistics.median(ms), min(ms)
    tokens = B * T
    print(f"loss {first:.4f} -> {loss:.4f} (one fixed batch)")
    print(f"ms/step: median {med:.1f}, min {best:.1f}, max {max(ms):.1f}")
    print(f"tokens/s: {tokens / (med * 1e-3):.1f} (median step)")
    print(f"peak RSS: {peak_rss_mib():.1f} MiB")
    print(f"result: impl=pytorch-{args.mode} model={args.model} B={B} T={T} threads={args.threads} dtype={args.dtype} "
          f"median_ms={med:.3f} min_ms={best:.3f} tokens_per_s={tokens / (med * 1e-3):.3f} "
          f"peak_rss_mib={peak_rss_mib():.1f} torch={torch.__version__} adamw={adamw} "
          f"attention={attention}")


if __name__ == "__main__":
    main()
