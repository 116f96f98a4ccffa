#!/usr/bin/env python3
"""PyTorch reference for the GPT-2 parity test (tests/models/test_gpt2_parity.cpp).

Builds a small GPT-2 in PyTorch, independently of llmcc's C++ (a nanoGPT-style module written
here), and writes the fixtures in tests/fixtures/gpt2/ (format: tests/fixtures/gpt2/README.md):
the weights as an llm.c fp32 model file, a batch, the logits, the loss, every parameter gradient
and the losses of 10 AdamW steps.

The model matches llmcc's src/models/gpt2/gpt2.h and its kernels: token + position embedding, pre-LN
blocks (layernorm eps 1e-5, causal self-attention with scale 1/sqrt(head size), GELU with the
tanh approximation, residuals), final layernorm, LM head tied to the token embedding over the
padded vocabulary Vp, cross-entropy over the first V logits only, targets of -1 ignored.
AdamW is torch.optim.AdamW (betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on tensors with
ndim >= 2 only), as llmcc's include/llmcc/train/adamw.h.

The computation runs in float64 so that the fixtures are the exact answer for the fp32 weights
(the test then measures only llmcc's fp32 rounding); --dtype float32 is there to see the float32
noise floor (printed as the difference to the float64 run) without writing anything.

Random numbers come from numpy's legacy RandomState, so the fixtures do not depend on the
PyTorch version. Works with PyTorch 2.x from the venv bench/setup_pytorch.sh makes (2.15.0:
--check says every file is identical or agrees; a fresh run differs from the committed files
only in the last bits of a few float64 AdamW losses and of 61 of grads.bin's 30,336 values,
near-zero gradients of about 1e-21) and with Debian's python3-torch 1.13:
    bench/setup_pytorch.sh                                         # once: build/venv-torch
    build/venv-torch/bin/python3 scripts/gpt2_reference.py --check # recomputes, compares, writes nothing
    build/venv-torch/bin/python3 scripts/gpt2_reference.py         # writes tests/fixtures/gpt2/
    /usr/bin/python3 scripts/gpt2_reference.py --check             # the same with Debian's torch
"""
import argparse
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

# The configuration and run (kept small: all fixtures together are about 0.3 MB).
V, VP, MAX_T, L, NH, C = 96, 128, 16, 2, 2, 32
B, T = 3, 13  # T < MAX_T: rows T.. of wpe get no gradient
SEED = 20240326
LR, BETAS, EPS, WEIGHT_DECAY = 3e-3, (0.9, 0.95), 1e-8, 0.1
STEPS = 10
IGNORED = (1, 4)  # (b, t) of one target set to -1 (ignored by the loss)

LLMC_MAGIC, LLMC_VERSION_F32 = 20240326, 3


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(C, eps=1e-5)
        self.c_attn = torch.nn.Linear(C, 3 * C)  # rows: q, k, v (llm.c's qkvw)
        self.attn_proj = torch.nn.Linear(C, C)
        self.ln_2 = torch.nn.LayerNorm(C, eps=1e-5)
        self.c_fc = torch.nn.Linear(C, 4 * C)
        self.mlp_proj = torch.nn.Linear(4 * C, C)

    def attention(self, x):  # x: (B, T, C)
        b, t, _ = x.shape
        hs = C // NH
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(b, t, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(b, t, NH, hs).transpose(1, 2)
        v = v.view(b, t, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, NH, T, T)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, C)  # (B, T, C)
        return self.attn_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(gelu_tanh(self.c_fc(self.ln_2(x))))


class Gpt2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Parameter(torch.zeros(VP, C))  # (Vp, C), also the LM head
        self.wpe = torch.nn.Parameter(torch.zeros(MAX_T, C))  # (maxT, C)
        self.h = torch.nn.ModuleList([Block() for _ in range(L)])
        self.ln_f = torch.nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte[idx] + self.wpe[:t]  # (B, T, C)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte)  # (B, T, Vp)
        loss = F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1), ignore_index=-1)
        return logits, loss


def llmc_tensors(model, grads=False):
    """The model's tensors (or their gradients) in llm.c's file order."""
    get = (lambda p: p.grad) if grads else (lambda p: p.data)
    hs = model.h
    out = [get(model.wte), get(model.wpe)]
    for name in ("ln_1.weight", "ln_1.bias", "c_attn.weight", "c_attn.bias", "attn_proj.weight",
                 "attn_proj.bias", "ln_2.weight", "ln_2.bias", "c_fc.weight", "c_fc.bias",
                 "mlp_proj.weight", "mlp_proj.bias"):
        for block in hs:
            out.append(get(block.get_parameter(name)))
    out += [get(model.ln_f.weight), get(model.ln_f.bias)]
    return out


def llmc_bytes(tensors):
    header = np.zeros(256, dtype="<i4")
    header[:8] = [LLMC_MAGIC, LLMC_VERSION_F32, MAX_T, V, L, NH, C, VP]
    body = b"".join(t.detach().to(torch.float32).numpy().astype("<f4").tobytes() for t in tensors)
    return header.tobytes() + body


def init_weights(rng):
    """GPT-2's initialisation in float32, then biases and layernorm parameters perturbed.

    GPT-2 (llm.c, nanoGPT): weights and embeddings N(0, 0.02), residual projections
    N(0, 0.02 / sqrt(2 L)), padded vocabulary rows zero. Biases and layernorm gains/shifts would
    start at 0 and 1, which hides a mix-up between them (e.g. q's and k's bias); they get small
    random values here so every parameter changes the loss.
    """
    normal = lambda shape, std: (rng.standard_normal(shape) * std).astype(np.float32)
    w = {"wte": normal((VP, C), 0.02), "wpe": normal((MAX_T, C), 0.02)}
    w["wte"][V:] = 0.0
    residual_std = 0.02 / math.sqrt(2 * L)
    for i in range(L):
        p = f"h.{i}."
        w[p + "ln_1.weight"] = (1.0 + normal((C,), 0.1)).astype(np.float32)
        w[p + "ln_1.bias"] = normal((C,), 0.02)
        w[p + "c_attn.weight"] = normal((3 * C, C), 0.02)
        w[p + "c_attn.bias"] = normal((3 * C,), 0.02)
        w[p + "attn_proj.weight"] = normal((C, C), residual_std)
        w[p + "attn_proj.bias"] = normal((C,), 0.02)
        w[p + "ln_2.weight"] = (1.0 + normal((C,), 0.1)).astype(np.float32)
        w[p + "ln_2.bias"] = normal((C,), 0.02)
        w[p + "c_fc.weight"] = normal((4 * C, C), 0.02)
        w[p + "c_fc.bias"] = normal((4 * C,), 0.02)
        w[p + "mlp_proj.weight"] = normal((C, 4 * C), residual_std)
        w[p + "mlp_proj.bias"] = normal((C,), 0.02)
    w["ln_f.weight"] = (1.0 + normal((C,), 0.1)).astype(np.float32)
    w["ln_f.bias"] = normal((C,), 0.02)
    return w


def build(weights, dtype):
    model = Gpt2().to(dtype)
    params = dict(model.named_parameters())
    assert set(params) == set(weights), sorted(set(params) ^ set(weights))
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(weights[name]).to(dtype))
    return model


def run(weights, idx, targets, dtype):
    """Logits, loss and gradients at the initial weights, then 10 AdamW steps on the same batch."""
    model = build(weights, dtype)
    logits, loss = model(idx, targets)
    loss.backward()
    first = {"logits": logits.detach().clone(), "loss": loss.item(), "grads": llmc_tensors(model, grads=True)}
    first["grads"] = [g.detach().clone() for g in first["grads"]]

    model = build(weights, dtype)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        _, loss = model(idx, targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        _, final = model(idx, targets)
    first["losses"] = losses
    first["final_loss"] = final.item()
    return first


def max_rel(a, b):
    return (a - b).abs().max().item() / max(b.abs().max().item(), 1e-30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "tests", "fixtures", "gpt2"))
    ap.add_argument("--check", action="store_true", help="compare with the files in --out, write nothing")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                    help="float32 only reports its difference to float64 (the noise floor)")
    args = ap.parse_args()
    torch.set_num_threads(1)  # reproducible reductions

    rng = np.random.RandomState(SEED)
    weights = init_weights(rng)
    idx_np = rng.randint(0, V, size=(B, T)).astype(np.int32)
    tgt_np = rng.randint(0, V, size=(B, T)).astype(np.int32)
    tgt_np[IGNORED] = -1
    idx, targets = torch.from_numpy(idx_np).long(), torch.from_numpy(tgt_np).long()

    ref = run(weights, idx, targets, torch.float64)
    print(f"torch {torch.__version__}: loss {ref['loss']:.8f}, AdamW losses "
          + " ".join(f"{x:.6f}" for x in ref["losses"]) + f", final {ref['final_loss']:.6f}")
    if args.dtype == "float32":
        f32 = run(weights, idx, targets, torch.float32)
        grad_rel = max(max_rel(a.double(), b) for a, b in zip(f32["grads"], ref["grads"]))
        print(f"float32 vs float64: logits max rel {max_rel(f32['logits'].double(), ref['logits']):.3g}, "
              f"loss {abs(f32['loss'] - ref['loss']):.3g}, worst gradient max rel {grad_rel:.3g}, "
              f"worst AdamW loss {max(abs(a - b) for a, b in zip(f32['losses'], ref['losses'])):.3g}")
        return 0

    # Gradients as an llm.c-layout file (same header), so the C++ side reads them with its importer.
    files = {
        "model.bin": llmc_bytes(llmc_tensors(build(weights, torch.float32))),
        "grads.bin": llmc_bytes(ref["grads"]),
        "batch.bin": np.array([B, T], dtype="<i4").tobytes() + idx_np.astype("<i4").tobytes()
                     + tgt_np.astype("<i4").tobytes(),
        "logits.bin": ref["logits"].to(torch.float32).numpy().astype("<f4").tobytes(),
    }
    kv = {
        # the model's shape in llmcc's checkpoint config keys (models::gpt2_config_from_kv reads them)
        "model.family": "gpt2", "model.vocab_size": str(V), "model.padded_vocab_size": str(VP),
        "model.max_seq_len": str(MAX_T), "model.n_layer": str(L), "model.n_head": str(NH),
        "model.n_embd": str(C), "batch.B": str(B), "batch.T": str(T),
        "seed": str(SEED),
        "loss": repr(ref["loss"]),
        "adamw.lr": repr(LR), "adamw.beta1": repr(BETAS[0]), "adamw.beta2": repr(BETAS[1]),
        "adamw.eps": repr(EPS), "adamw.weight_decay": repr(WEIGHT_DECAY),
        "adamw.losses": " ".join(repr(x) for x in ref["losses"]),
        "adamw.final_loss": repr(ref["final_loss"]),
        "generator": "scripts/gpt2_reference.py (float64)",
    }
    files["reference.txt"] = "".join(f"{k}={kv[k]}\n" for k in sorted(kv)).encode()

    if args.check:
        # Another PyTorch version may round the last float64 bit differently: numbers must agree
        # to 1e-6 relative (far below the test's 1e-4), token ids exactly.
        ok = True
        for name, data in files.items():
            with open(os.path.join(args.out, name), "rb") as f:
                old = f.read()
            if name == "reference.txt":
                a = dict(line.split("=", 1) for line in old.decode().splitlines())
                b = dict(line.split("=", 1) for line in data.decode().splitlines())
                same = a.keys() == b.keys() and all(
                    a[k] == b[k] or np.allclose(np.array(a[k].split(), dtype=float),
                                                np.array(b[k].split(), dtype=float), rtol=1e-6, atol=0)
                    for k in a if k not in ("model.family", "generator"))
            elif name == "batch.bin":
                same = old == data
            else:
                x, y = np.frombuffer(old, dtype="<f4"), np.frombuffer(data, dtype="<f4")
                same = x.shape == y.shape and np.abs(x - y).max() <= 1e-6 * np.abs(y).max()
            print(f"{name}: {'identical' if old == data else 'agrees' if same else 'DIFFERS'}")
            ok = ok and same
        return 0 if ok else 1

    os.makedirs(args.out, exist_ok=True)
    total = 0
    for name, data in files.items():
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(data)
        total += len(data)
    print(f"wrote {len(files)} files, {total} bytes, to {os.path.normpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
