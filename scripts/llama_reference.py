#!/usr/bin/env python3
"""Hugging Face transformers reference for the Llama parity test (tests/models/test_llama_parity.cpp).

Builds a small grouped-query Llama as transformers' own LlamaForCausalLM and writes the fixtures
in tests/fixtures/llama/ (format: tests/fixtures/llama/README.md): the weights as a Hugging Face
model directory (config.json and model.safetensors, which llmcc reads through its Hugging Face
mapping, rotary q/k row permutation included), a batch, the logits, the loss, every parameter
gradient (Hugging Face names and layout, grads.safetensors) and the losses of 10 AdamW steps.

The model is transformers' code, not a re-implementation: only three spots that transformers
computes in float32 even in a float64 model (RMSNorm's normalisation, the rotary angles, eager
attention's softmax) are made float64 (sdpa attention, and the two replaced per module instance)
so that the fixtures are the exact answer for the fp32 weights, as scripts/gpt2_reference.py's
are, and the test measures only llmcc's fp32 error. Every run also computes transformers exactly
as shipped (float64 with those float32 casts, eager attention) and prints its difference to the
written answer: it must be float32 rounding (about 1e-7), which shows the three replacements
change precision, not the model.

AdamW is torch.optim.AdamW (betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on tensors with
ndim >= 2 only, constant learning rate 3e-3), as llmcc's include/llmcc/train/adamw.h applies it
to the Llama's parameters (embedding, head and projections decayed, RMSNorm gains not).

Random numbers come from numpy's legacy RandomState, so the fixtures do not depend on the PyTorch
or transformers version. Needs torch, transformers (5.x) and safetensors: the venv that
bench/setup_pytorch.sh makes (build/venv-torch) has them.
    build/venv-torch/bin/python3 scripts/llama_reference.py --check  # recompute, compare, write nothing
    build/venv-torch/bin/python3 scripts/llama_reference.py          # write tests/fixtures/llama/
    build/venv-torch/bin/python3 scripts/llama_reference.py --check --llmcc build/llmcc
        # also: llmcc export of the fixture model loads in transformers with the same logits, and
        # the GPT-2 round trip through GPT2LMHeadModel (scripts/hf_gpt2_roundtrip.py)
--rope-theta and --norm-eps change the model (written fixtures then hold that configuration;
--check compares against the committed ones, which use the defaults).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from safetensors.numpy import load_file as load_safetensors
from safetensors.torch import save_file as save_safetensors
from transformers.models.llama.modeling_llama import LlamaRMSNorm

HERE = os.path.dirname(os.path.abspath(__file__))

# The configuration and run (kept small: all fixtures together are under 0.5 MB).
V, MAX_T, L, NH, NKV, C = 64, 16, 2, 4, 2, 48  # head size 12: six rotary pairs per head
B, T = 3, 13  # T < MAX_T
SEED = 20241123
LR, BETAS, EPS, WEIGHT_DECAY = 3e-3, (0.9, 0.95), 1e-8, 0.1
STEPS = 10
IGNORED = (1, 4)  # (b, t) of one target set to -1 (ignored by the loss)
ROPE_THETA, NORM_EPS = 1000.0, 1e-6  # neither is a default anywhere, so a dropped value shows


def llama_hidden_dim(dim, multiple_of):
    """llmcc's models::llama_hidden_dim (Meta's SwiGLU width): 2/3 of 4 * dim, rounded up."""
    hidden = 2 * (4 * dim) // 3
    return (hidden + multiple_of - 1) // multiple_of * multiple_of


F_HIDDEN = llama_hidden_dim(C, 32)  # 128


def hf_config(rope_theta, norm_eps, attn):
    return transformers.LlamaConfig(
        vocab_size=V, hidden_size=C, intermediate_size=F_HIDDEN, num_hidden_layers=L, num_attention_heads=NH,
        num_key_value_heads=NKV, head_dim=C // NH, max_position_embeddings=MAX_T, rms_norm_eps=norm_eps,
        rope_theta=rope_theta, hidden_act="silu", attention_bias=False, mlp_bias=False, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, attn_implementation=attn)


def init_weights(rng):
    """Hugging Face names -> float32 arrays, in Hugging Face layout.

    llama2.c's / nanoGPT's initialisation (weights and embedding N(0, 0.02), residual
    projections o_proj and down_proj N(0, 0.02 / sqrt(2 L))) with two changes so that every
    parameter matters to the test: q_proj and k_proj are N(0, 0.1), which makes attention scores
    of order one (at 0.02 the softmax is nearly uniform and rotary positions barely move the
    loss), and the RMSNorm gains are 1 + N(0, 0.1) instead of one.
    """
    normal = lambda shape, std: (rng.standard_normal(shape) * std).astype(np.float32)
    hs, residual_std = C // NH, 0.02 / np.sqrt(2 * L)
    w = {"model.embed_tokens.weight": normal((V, C), 0.02)}
    for i in range(L):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = (1.0 + normal((C,), 0.1)).astype(np.float32)
        w[p + "self_attn.q_proj.weight"] = normal((NH * hs, C), 0.1)
        w[p + "self_attn.k_proj.weight"] = normal((NKV * hs, C), 0.1)
        w[p + "self_attn.v_proj.weight"] = normal((NKV * hs, C), 0.02)
        w[p + "self_attn.o_proj.weight"] = normal((C, NH * hs), residual_std)
        w[p + "post_attention_layernorm.weight"] = (1.0 + normal((C,), 0.1)).astype(np.float32)
        w[p + "mlp.gate_proj.weight"] = normal((F_HIDDEN, C), 0.02)
        w[p + "mlp.up_proj.weight"] = normal((F_HIDDEN, C), 0.02)
        w[p + "mlp.down_proj.weight"] = normal((C, F_HIDDEN), residual_std)
    w["model.norm.weight"] = (1.0 + normal((C,), 0.1)).astype(np.float32)
    w["lm_head.weight"] = normal((V, C), 0.02)
    return w


def rmsnorm_float64(module, x):
    """LlamaRMSNorm.forward without its round trip through float32."""
    return module.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + module.variance_epsilon))


def make_exact(model):
    """Replaces, on this model's instances only, the float32 parts of transformers' Llama."""
    cfg = model.config
    hs = cfg.head_dim
    inv_freq = 1.0 / cfg.rope_parameters["rope_theta"] ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)

    def rotary(x, position_ids):  # LlamaRotaryEmbedding.forward (default rope type) in float64
        freqs = position_ids[..., None].to(torch.float64) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    assert cfg.rope_parameters["rope_type"] == "default", cfg.rope_parameters
    assert cfg._attn_implementation == "sdpa", cfg._attn_implementation  # eager's softmax is float32
    model.model.rotary_emb.forward = rotary
    norms = [m for m in model.modules() if isinstance(m, LlamaRMSNorm)]
    assert len(norms) == 2 * L + 1, len(norms)
    for m in norms:
        m.forward = rmsnorm_float64.__get__(m)
    return model


def build(weights, dtype, rope_theta, norm_eps, exact):
    model = transformers.LlamaForCausalLM(hf_config(rope_theta, norm_eps, "sdpa" if exact else "eager"))
    params = dict(model.named_parameters())
    assert set(params) == set(weights), sorted(set(params) ^ set(weights))
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(weights[name]))
    model = model.to(dtype).train()  # no dropout in Llama; train() only enables autograd bookkeeping
    return make_exact(model) if exact else model


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)


def run(weights, idx, targets, dtype, rope_theta, norm_eps, exact=True):
    """Logits, loss and gradients at the initial weights, then 10 AdamW steps on the same batch."""
    model = build(weights, dtype, rope_theta, norm_eps, exact)
    logits = model(idx).logits  # (B, T, V)
    loss = loss_of(logits, targets)
    loss.backward()
    out = {"logits": logits.detach().clone(), "loss": loss.item(),
           "grads": {n: p.grad.detach().clone() for n, p in model.named_parameters()}}

    model = build(weights, dtype, rope_theta, norm_eps, exact)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    assert len(no_decay) == 2 * L + 1  # the RMSNorm gains
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}], lr=LR, betas=BETAS, eps=EPS)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model(idx).logits, targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        out["final_loss"] = loss_of(model(idx).logits, targets).item()
    out["losses"] = losses
    return out


def max_rel(a, b):
    return (a - b).abs().max().item() / max(b.abs().max().item(), 1e-30)


def compare(name, a, b):
    """Worst relative difference between two runs: logits, each gradient, losses."""
    grad = max((max_rel(a["grads"][n].double(), b["grads"][n]), n) for n in b["grads"])
    print(f"{name}: logits max rel {max_rel(a['logits'].double(), b['logits']):.3g}, "
          f"loss {abs(a['loss'] - b['loss']):.3g}, worst gradient max rel {grad[0]:.3g} ({grad[1]}), "
          f"worst AdamW loss {max(abs(x - y) for x, y in zip(a['losses'], b['losses'])):.3g}")


def hf_logits(model_dir, idx):
    """Logits of a model directory as transformers loads it (float64, sdpa)."""
    model = transformers.LlamaForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa")
    model = make_exact(model.double().eval())
    with torch.no_grad():
        return model(idx).logits


def llmcc_export_check(llmcc, out_dir, idx, want_logits):
    """llmcc's export of the fixture model, loaded by transformers, gives the fixture's logits."""
    with tempfile.TemporaryDirectory() as tmp:
        exported = os.path.join(tmp, "exported")
        subprocess.run([llmcc, "export", "--ckpt", out_dir, "--format", "safetensors", "--out", exported],
                       check=True, capture_output=True)
        got = hf_logits(exported, idx)
        err = max_rel(got.to(torch.float32).double(), want_logits.double())
        theta = transformers.AutoConfig.from_pretrained(exported).rope_parameters["rope_theta"]
    ok = err <= 1e-6 and theta == ROPE_THETA
    print(f"llmcc export --format safetensors -> LlamaForCausalLM: logits max rel {err:.3g}, "
          f"rope_theta {theta} ({'OK' if ok else 'FAILED'})")
    return ok


def gpt2_roundtrip(llmcc):
    """scripts/hf_gpt2_roundtrip.py: an llmcc GPT-2 export in GPT2LMHeadModel, and back."""
    sys.path.insert(0, HERE)
    import hf_gpt2_roundtrip
    return hf_gpt2_roundtrip.main(["--llmcc", llmcc]) == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "fixtures", "llama"))
    ap.add_argument("--check", action="store_true", help="compare with the files in --out, write nothing")
    ap.add_argument("--rope-theta", type=float, default=ROPE_THETA)
    ap.add_argument("--norm-eps", type=float, default=NORM_EPS)
    ap.add_argument("--llmcc", help="llmcc binary: also check its export in transformers and the GPT-2 round trip")
    args = ap.parse_args()
    torch.set_num_threads(1)  # reproducible reductions
    out_dir = os.path.normpath(args.out)

    rng = np.random.RandomState(SEED)
    weights = init_weights(rng)
    idx_np = rng.randint(0, V, size=(B, T)).astype(np.int32)
    tgt_np = rng.randint(0, V, size=(B, T)).astype(np.int32)
    tgt_np[IGNORED] = -1
    idx, targets = torch.from_numpy(idx_np).long(), torch.from_numpy(tgt_np).long()

    ref = run(weights, idx, targets, torch.float64, args.rope_theta, args.norm_eps)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: loss {ref['loss']:.8f}, "
          "AdamW losses " + " ".join(f"{x:.6f}" for x in ref["losses"]) + f", final {ref['final_loss']:.6f}")
    compare("transformers as shipped (float64, float32 RMSNorm/rotary/softmax) vs written",
            run(weights, idx, targets, torch.float64, args.rope_theta, args.norm_eps, exact=False), ref)
    compare("float32 vs written", run(weights, idx, targets, torch.float32, args.rope_theta, args.norm_eps), ref)

    # config.json as save_pretrained writes it (non-default keys), less the transformers version.
    hf = hf_config(args.rope_theta, args.norm_eps, "sdpa")
    hf.architectures, hf.dtype = ["LlamaForCausalLM"], "float32"
    config = json.loads(hf.to_json_string(use_diff=True))
    config.pop("transformers_version", None)
    files = {
        "config.json": (json.dumps(config, indent=2, sort_keys=True) + "\n").encode(),
        "model.safetensors": weights,
        "grads.safetensors": {n: g.to(torch.float32).numpy() for n, g in ref["grads"].items()},
        "batch.bin": np.array([B, T], dtype="<i4").tobytes() + idx_np.astype("<i4").tobytes()
                     + tgt_np.astype("<i4").tobytes(),
        "logits.bin": ref["logits"].to(torch.float32).numpy().astype("<f4").tobytes(),
    }
    kv = {
        # the model's shape in llmcc's checkpoint config keys (models::llama_config_from_kv reads them)
        "model.family": "llama", "model.vocab_size": str(V), "model.max_seq_len": str(MAX_T),
        "model.n_layer": str(L), "model.n_head": str(NH), "model.n_kv_head": str(NKV), "model.n_embd": str(C),
        "model.hidden_dim": str(F_HIDDEN), "model.rope_theta": repr(args.rope_theta),
        "model.norm_eps": repr(args.norm_eps),
        "batch.B": str(B), "batch.T": str(T), "seed": str(SEED),
        "loss": repr(ref["loss"]),
        "adamw.lr": repr(LR), "adamw.beta1": repr(BETAS[0]), "adamw.beta2": repr(BETAS[1]),
        "adamw.eps": repr(EPS), "adamw.weight_decay": repr(WEIGHT_DECAY),
        "adamw.losses": " ".join(repr(x) for x in ref["losses"]),
        "adamw.final_loss": repr(ref["final_loss"]),
        "generator": "scripts/llama_reference.py (transformers LlamaForCausalLM, float64)",
    }
    files["reference.txt"] = "".join(f"{k}={kv[k]}\n" for k in sorted(kv)).encode()

    ok = True
    if args.check:
        # Another torch version may round the last float64 bit differently: numbers must agree to
        # 1e-6 relative (far below the test's 1e-4), token ids and weights exactly.
        for name, data in files.items():
            path = os.path.join(out_dir, name)
            if name.endswith(".safetensors"):
                old = load_safetensors(path)
                same = old.keys() == data.keys() and all(
                    old[n].shape == data[n].shape and old[n].dtype == np.float32 for n in data)
                exact = same and all(np.array_equal(old[n], data[n]) for n in data)
                same = exact or (same and name == "grads.safetensors" and all(
                    np.abs(old[n] - data[n]).max() <= 1e-6 * np.abs(data[n]).max() for n in data))
            else:
                with open(path, "rb") as f:
                    old = f.read()
                exact = old == data
                if name == "config.json":
                    same = json.loads(old) == json.loads(data)
                elif name == "reference.txt":
                    a = dict(line.split("=", 1) for line in old.decode().splitlines())
                    b = dict(line.split("=", 1) for line in data.decode().splitlines())
                    same = a.keys() == b.keys() and all(
                        a[k] == b[k] or np.allclose(np.array(a[k].split(), dtype=float),
                                                    np.array(b[k].split(), dtype=float), rtol=1e-6, atol=0)
                        for k in a if k not in ("model.family", "generator"))
                elif name == "batch.bin":
                    same = exact
                else:
                    x, y = np.frombuffer(old, dtype="<f4"), np.frombuffer(data, dtype="<f4")
                    same = x.shape == y.shape and np.abs(x - y).max() <= 1e-6 * np.abs(y).max()
            print(f"{name}: {'identical' if exact else 'agrees' if same else 'DIFFERS'}")
            ok = ok and same
    else:
        os.makedirs(out_dir, exist_ok=True)
        total = 0
        for name, data in files.items():
            path = os.path.join(out_dir, name)
            if name.endswith(".safetensors"):
                save_safetensors({n: torch.from_numpy(a) for n, a in data.items()}, path, metadata={"format": "pt"})
            else:
                with open(path, "wb") as f:
                    f.write(data)
            total += os.path.getsize(path)
        print(f"wrote {len(files)} files, {total} bytes, to {out_dir}")

    # The directory is a Hugging Face model: transformers loads it and computes the written logits.
    err = max_rel(hf_logits(out_dir, idx), ref["logits"])
    print(f"LlamaForCausalLM.from_pretrained({out_dir}): logits max rel {err:.3g} to the written ones")
    ok = ok and err <= 1e-12
    if args.llmcc:
        ok = llmcc_export_check(args.llmcc, out_dir, idx, ref["logits"].to(torch.float32)) and ok
        ok = gpt2_roundtrip(args.llmcc) and ok
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
