#!/usr/bin/env python3
"""Hugging Face transformers reference for the Qwen3 parity fixtures (tests/fixtures/qwen3/, tests/fixtures/qwen3_tied/).

Builds a small grouped-query Qwen3 as transformers' own Qwen3ForCausalLM, twice (an untied
lm_head, and the head tied to the embedding), and writes the fixtures in tests/fixtures/qwen3/
and tests/fixtures/qwen3_tied/ (format: tests/fixtures/qwen3/README.md): the weights as a Hugging
Face model directory (config.json and model.safetensors, which llmcc reads through its Qwen3
Hugging Face import, rotary permutation of q_proj/k_proj rows and q_norm/k_norm included), a
batch, the logits, the loss, every parameter gradient (Hugging Face names and layout,
grads.safetensors) and the losses of 10 AdamW steps.

The model is transformers' code, not a re-implementation: only three spots that transformers
computes in float32 even in a float64 model (Qwen3RMSNorm's normalisation, which Qwen3 also uses
for the per-head q_norm and k_norm, the rotary angles, eager attention's softmax) are made
float64 (sdpa attention, and the two replaced per module instance) so that the fixtures are the
exact answer for the fp32 weights, as scripts/llama_reference.py's are, and the test measures
only llmcc's fp32 error. Every run also computes transformers exactly as shipped (float64 with
those float32 casts, eager attention) and prints its difference to the written answer: it must be
float32 rounding (about 1e-7), which shows the three replacements change precision, not the model.

AdamW is torch.optim.AdamW (betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on tensors with
ndim >= 2 only, constant learning rate 3e-3), as llmcc's include/llmcc/train/adamw.h applies it
(embedding, head and projections decayed; RMSNorm gains, q_norm and k_norm included, not).

Both directories hold the same model but for the head: every tensor they share is the same bit
for bit (the untied head is drawn for both and dropped from the tied model), and so are the batch.

Random numbers come from numpy's legacy RandomState, so the fixtures do not depend on the PyTorch
or transformers version. Needs torch, transformers (5.x, with Qwen3) and safetensors: the venv
that bench/setup_pytorch.sh makes (build/venv-torch) has them.
    build/venv-torch/bin/python3 scripts/qwen3_reference.py --check  # recompute, compare, write nothing
    build/venv-torch/bin/python3 scripts/qwen3_reference.py          # write tests/fixtures/qwen3{,_tied}/
    build/venv-torch/bin/python3 scripts/qwen3_reference.py --check --llmcc build/llmcc
        # also: llmcc export of each fixture model loads in transformers with the same logits
--out names the directory that holds qwen3/ and qwen3_tied/ (default tests/fixtures).
"""
import argparse
import os
import sys

import numpy as np
import torch
import transformers
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

import hf_reference as hr
from hf_reference import compare, max_rel

HERE = os.path.dirname(os.path.abspath(__file__))

# The configuration and run (kept small: all fixtures of both directories are under 1 MB).
V, MAX_T, L, NH, NKV, C = 64, 16, 2, 4, 2, 48
HEAD_DIM = 16  # not C / NH = 12: Qwen3's head size is its own setting (eight rotary pairs per head)
F_HIDDEN = 96  # intermediate_size
B, T = 3, 13  # T < MAX_T
SEED = 20241128
IGNORED = (1, 4)  # (b, t) of one target set to -1 (ignored by the loss)
ROPE_THETA, NORM_EPS = 1000.0, 1e-5  # neither transformers' defaults (1e4, 1e-6) nor llmcc's (1e6, 1e-6)
DIRS = {False: "qwen3", True: "qwen3_tied"}  # tie_word_embeddings -> directory under --out


def hf_config(tied, attn):
    return transformers.Qwen3Config(
        vocab_size=V, hidden_size=C, intermediate_size=F_HIDDEN, num_hidden_layers=L, num_attention_heads=NH,
        num_key_value_heads=NKV, head_dim=HEAD_DIM, max_position_embeddings=MAX_T, rms_norm_eps=NORM_EPS,
        rope_theta=ROPE_THETA, hidden_act="silu", attention_bias=False, use_sliding_window=False,
        tie_word_embeddings=tied, bos_token_id=1, eos_token_id=2, attn_implementation=attn)


def init_weights(rng):
    """Hugging Face names -> float32 arrays, in Hugging Face layout, lm_head.weight included.

    llama_reference.py's initialisation (weights and embedding N(0, 0.02), residual projections
    o_proj and down_proj N(0, 0.02 / sqrt(2 L)), q_proj and k_proj N(0, 0.1) so that attention
    scores are of order one and rotary positions move the loss, RMSNorm gains 1 + N(0, 0.1)), with
    Qwen3's per-head q_norm and k_norm gains (HEAD_DIM each) 1 + N(0, 0.1) as well. Drawn in this
    fixed order, the head last, so that the tied model (which drops lm_head.weight) shares every
    other tensor with the untied one bit for bit.
    """
    normal = lambda shape, std: (rng.standard_normal(shape) * std).astype(np.float32)
    gain = lambda n: (1.0 + normal((n,), 0.1)).astype(np.float32)
    residual_std = 0.02 / np.sqrt(2 * L)
    w = {"model.embed_tokens.weight": normal((V, C), 0.02)}
    for i in range(L):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = gain(C)
        w[p + "self_attn.q_proj.weight"] = normal((NH * HEAD_DIM, C), 0.1)
        w[p + "self_attn.k_proj.weight"] = normal((NKV * HEAD_DIM, C), 0.1)
        w[p + "self_attn.v_proj.weight"] = normal((NKV * HEAD_DIM, C), 0.02)
        w[p + "self_attn.o_proj.weight"] = normal((C, NH * HEAD_DIM), residual_std)
        w[p + "self_attn.q_norm.weight"] = gain(HEAD_DIM)
        w[p + "self_attn.k_norm.weight"] = gain(HEAD_DIM)
        w[p + "post_attention_layernorm.weight"] = gain(C)
        w[p + "mlp.gate_proj.weight"] = normal((F_HIDDEN, C), 0.02)
        w[p + "mlp.up_proj.weight"] = normal((F_HIDDEN, C), 0.02)
        w[p + "mlp.down_proj.weight"] = normal((C, F_HIDDEN), residual_std)
    w["model.norm.weight"] = gain(C)
    w["lm_head.weight"] = normal((V, C), 0.02)
    return w


def model_weights(weights, tied):
    """The parameters of the untied or the tied model: the tied one has no lm_head.weight."""
    return {n: a for n, a in weights.items() if not (tied and n == "lm_head.weight")}


def make_exact(model):
    """Replaces, on this model's instances only, the float32 parts of transformers' Qwen3."""
    # Two norms per block and the final one, plus each attention's q_norm and k_norm.
    return hr.make_exact(model, Qwen3RMSNorm, 4 * L + 1)


def build(weights, dtype, tied, exact):
    model = transformers.Qwen3ForCausalLM(hf_config(tied, "sdpa" if exact else "eager"))
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tied
    model = hr.load_weights(model, weights, dtype)
    return make_exact(model) if exact else model


def run(weights, idx, targets, dtype, tied, exact=True):
    """Logits, loss and gradients at the initial weights, then 10 AdamW steps on the same batch."""
    # 4 L + 1 undecayed parameters: the RMSNorm gains, q_norm and k_norm included
    return hr.run(lambda: build(weights, dtype, tied, exact), idx, targets, 4 * L + 1)


def hf_logits(model_dir, idx):
    """Logits of a model directory as transformers loads it (float64, sdpa)."""
    return hr.hf_logits(transformers.Qwen3ForCausalLM, make_exact, model_dir, idx)


def llmcc_export_check(llmcc, out_dir, tied, idx, want_logits):
    """llmcc's export of the fixture model, loaded by transformers, gives the fixture's logits."""
    got, cfg = hr.exported_logits(llmcc, out_dir, transformers.Qwen3ForCausalLM, make_exact, idx)
    err = max_rel(got.to(torch.float32).double(), want_logits.double())
    theta, exported_tied = cfg.rope_parameters["rope_theta"], cfg.tie_word_embeddings
    ok = err <= 1e-6 and theta == ROPE_THETA and exported_tied == tied
    print(f"llmcc export --format safetensors of {out_dir} -> Qwen3ForCausalLM: logits max rel {err:.3g}, "
          f"rope_theta {theta}, tie_word_embeddings {exported_tied} ({'OK' if ok else 'FAILED'})")
    return ok


def fixture_files(weights, tied, idx_np, tgt_np, ref):
    """File name -> contents (bytes, or name -> array for the safetensors files)."""
    kv = {
        # the model's shape in llmcc's checkpoint config keys (Qwen3Config's fields)
        "model.family": "qwen3", "model.vocab_size": str(V), "model.max_seq_len": str(MAX_T),
        "model.n_layer": str(L), "model.n_head": str(NH), "model.n_kv_head": str(NKV), "model.n_embd": str(C),
        "model.head_dim": str(HEAD_DIM), "model.hidden_dim": str(F_HIDDEN), "model.rope_theta": repr(ROPE_THETA),
        "model.norm_eps": repr(NORM_EPS), "model.tie_embeddings": "true" if tied else "false",
        "batch.B": str(B), "batch.T": str(T), "seed": str(SEED),
        "generator": "scripts/qwen3_reference.py (transformers Qwen3ForCausalLM, float64)",
    }
    config = hr.config_json(hf_config(tied, "sdpa"), "Qwen3ForCausalLM")
    return hr.fixture_files(config, weights, idx_np, tgt_np, ref, kv)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "fixtures"),
                    help="directory that holds qwen3/ (untied head) and qwen3_tied/ (tied head)")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out, write nothing")
    ap.add_argument("--llmcc", help="llmcc binary: also check its export of each fixture model in transformers")
    args = ap.parse_args()
    torch.set_num_threads(1)  # reproducible reductions

    rng = np.random.RandomState(SEED)
    all_weights = init_weights(rng)
    idx_np = rng.randint(0, V, size=(B, T)).astype(np.int32)
    tgt_np = rng.randint(0, V, size=(B, T)).astype(np.int32)
    tgt_np[IGNORED] = -1
    idx, targets = torch.from_numpy(idx_np).long(), torch.from_numpy(tgt_np).long()

    ok = True
    for tied, sub in DIRS.items():
        out_dir = os.path.normpath(os.path.join(args.out, sub))
        weights = model_weights(all_weights, tied)
        ref = run(weights, idx, targets, torch.float64, tied)
        print(f"{sub} (tie_word_embeddings={tied}), transformers {transformers.__version__}, torch "
              f"{torch.__version__}: loss {ref['loss']:.8f}, AdamW losses "
              + " ".join(f"{x:.6f}" for x in ref["losses"]) + f", final {ref['final_loss']:.6f}")
        compare("transformers as shipped (float64, float32 RMSNorm/rotary/softmax) vs written",
                run(weights, idx, targets, torch.float64, tied, exact=False), ref)
        compare("float32 vs written", run(weights, idx, targets, torch.float32, tied), ref)

        files = fixture_files(weights, tied, idx_np, tgt_np, ref)
        if args.check:
            ok = hr.check_files(out_dir, files, ("model.family", "model.tie_embeddings", "generator")) and ok
        else:
            hr.write_files(out_dir, files)

        # The directory is a Hugging Face model: transformers loads it and computes the written logits.
        err = max_rel(hf_logits(out_dir, idx), ref["logits"])
        print(f"Qwen3ForCausalLM.from_pretrained({out_dir}): logits max rel {err:.3g} to the written ones")
        ok = ok and err <= 1e-12
        if args.llmcc:
            ok = llmcc_export_check(args.llmcc, out_dir, tied, idx, ref["logits"].to(torch.float32)) and ok
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
