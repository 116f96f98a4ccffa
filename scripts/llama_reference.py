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
import os
import sys

import numpy as np
import torch
import transformers
from transformers.models.llama.modeling_llama import LlamaRMSNorm

import hf_reference as hr
from hf_reference import compare, loss_of, max_rel  # noqa: F401 (loss_of: lora_reference.py's)

HERE = os.path.dirname(os.path.abspath(__file__))

# The configuration and run (kept small: all fixtures together are under 0.5 MB).
V, MAX_T, L, NH, NKV, C = 64, 16, 2, 4, 2, 48  # head size 12: six rotary pairs per head
B, T = 3, 13  # T < MAX_T
SEED = 20241123
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


def make_exact(model):
    """Replaces, on this model's instances only, the float32 parts of transformers' Llama."""
    return hr.make_exact(model, LlamaRMSNorm, 2 * L + 1)


def build(weights, dtype, rope_theta, norm_eps, exact):
    model = transformers.LlamaForCausalLM(hf_config(rope_theta, norm_eps, "sdpa" if exact else "eager"))
    model = hr.load_weights(model, weights, dtype)
    return make_exact(model) if exact else model


def run(weights, idx, targets, dtype, rope_theta, norm_eps, exact=True):
    """Logits, loss and gradients at the initial weights, then 10 AdamW steps on the same batch."""
    # 2 L + 1 undecayed parameters: the RMSNorm gains
    return hr.run(lambda: build(weights, dtype, rope_theta, norm_eps, exact), idx, targets, 2 * L + 1)


def hf_logits(model_dir, idx):
    """Logits of a model directory as transformers loads it (float64, sdpa)."""
    return hr.hf_logits(transformers.LlamaForCausalLM, make_exact, model_dir, idx)


def llmcc_export_check(llmcc, out_dir, idx, want_logits):
    """llmcc's export of the fixture model, loaded by transformers, gives the fixture's logits."""
    got, cfg = hr.exported_logits(llmcc, out_dir, transformers.LlamaForCausalLM, make_exact, idx)
    err = max_rel(got.to(torch.float32).double(), want_logits.double())
    theta = cfg.rope_parameters["rope_theta"]
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

    kv = {
        # the model's shape in llmcc's checkpoint config keys (models::llama_config_from_kv reads them)
        "model.family": "llama", "model.vocab_size": str(V), "model.max_seq_len": str(MAX_T),
        "model.n_layer": str(L), "model.n_head": str(NH), "model.n_kv_head": str(NKV), "model.n_embd": str(C),
        "model.hidden_dim": str(F_HIDDEN), "model.rope_theta": repr(args.rope_theta),
        "model.norm_eps": repr(args.norm_eps),
        "batch.B": str(B), "batch.T": str(T), "seed": str(SEED),
        "generator": "scripts/llama_reference.py (transformers LlamaForCausalLM, float64)",
    }
    config = hr.config_json(hf_config(args.rope_theta, args.norm_eps, "sdpa"), "LlamaForCausalLM")
    files = hr.fixture_files(config, weights, idx_np, tgt_np, ref, kv)
    ok = hr.check_files(out_dir, files) if args.check else True
    if not args.check:
        hr.write_files(out_dir, files)

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
