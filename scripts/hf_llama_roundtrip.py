#!/usr/bin/env python3
"""Llama round trip through Hugging Face transformers (issue 6): does an llmcc Llama export load in
LlamaForCausalLM and compute what llmcc computes?

1. Writes a small token data set (a repeated 50-token pattern) and trains llama-tiny on it for 40
   steps with `llmcc train`, so that attention matters for the loss (a random model's near-uniform
   logits would hide a wrong rotary permutation).
2. `llmcc eval` gives the loss of one (1, 32) window of the validation file.
3. `llmcc export --format safetensors`; transformers loads it (float64) and computes the same
   window's loss. They must agree to fp32 accuracy.
4. Control: the same weights with q_proj/k_proj left in llmcc's row order (no rotary
   permutation) must give a visibly different loss, so the check can fail.
5. save_pretrained writes the model back; `llmcc export` reads that directory into an llmcc
   checkpoint and `llmcc eval` gives the same loss again.
6. Llama 3 rope scaling: the export's config.json gets a strong "llama3" rope_scaling (original
   context 16, factor 4, so that every band of the formula is hit within 32 positions); `llmcc
   eval` on that directory and transformers must give the same loss, and it must differ from the
   unscaled loss by more than the tolerance.

Not a default test (CI has no PyPI packages; about a minute on 2 cores). Needs torch and
transformers (bench/setup_pytorch.sh, then build/venv-torch/bin/pip install transformers
safetensors):
  build/venv-torch/bin/python3 scripts/hf_llama_roundtrip.py --llmcc build/llmcc
Exit status 0 when everything matches, 1 otherwise.
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
import transformers

B, T = 1, 32


def write_tokens(path, tokens):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))


def llmcc_eval(llmcc, ckpt, val):
    out = subprocess.run([llmcc, "eval", "--ckpt", ckpt, "--val-data", val, "--batch-size", str(B), "--seq-len",
                          str(T), "--threads", "1", "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["loss"]


def hf_loss(model, tokens):
    x = torch.tensor([tokens[:T]])
    y = torch.tensor([tokens[1:T + 1]])
    with torch.no_grad():
        logits = model(x).logits
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)))


def unpermute(w, n_heads):
    """transformers' row order -> llmcc's (Meta's) interleaved order, per head."""
    rows, cols = w.shape
    hs = rows // n_heads
    return w.view(n_heads, 2, hs // 2, cols).transpose(1, 2).reshape(rows, cols)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmcc", required=True, help="path to the llmcc binary")
    ap.add_argument("--tol", type=float, default=2e-5, help="loss tolerance (llmcc fp32 vs float64)")
    args = ap.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        rng = random.Random(1)
        pattern = [rng.randrange(500) for _ in range(50)]
        train, val = os.path.join(tmp, "train.bin"), os.path.join(tmp, "val.bin")
        write_tokens(train, [pattern[i % 50] for i in range(4000)])
        val_tokens = [pattern[(i + 7) % 50] for i in range(T + 1)]
        write_tokens(val, val_tokens)
        run = os.path.join(tmp, "run")
        subprocess.run([args.llmcc, "train", "--model", "llama-tiny", "--train-data", train, "--val-data", val,
                        "--steps", "40", "--lr", "3e-3", "--batch-size", str(B), "--seq-len", str(T),
                        "--val-every", "40", "--out-dir", run], check=True, capture_output=True)
        ckpt = os.path.join(run, "ckpt_000040.bin")
        want = llmcc_eval(args.llmcc, ckpt, val)

        hf = os.path.join(tmp, "hf")
        subprocess.run([args.llmcc, "export", "--ckpt", ckpt, "--format", "safetensors", "--out", hf],
                       check=True, capture_output=True)
        model = transformers.LlamaForCausalLM.from_pretrained(hf).double().eval()
        got = hf_loss(model, val_tokens)
        print(f"loss: llmcc eval {want:.6f}, transformers {got:.6f}, diff {abs(got - want):.2g} (tol {args.tol:g})")
        ok = ok and abs(got - want) <= args.tol

        cfg = model.config
        broken = transformers.LlamaForCausalLM.from_pretrained(hf).double().eval()
        with torch.no_grad():
            for layer in broken.model.layers:
                layer.self_attn.q_proj.weight.copy_(unpermute(layer.self_attn.q_proj.weight, cfg.num_attention_heads))
                layer.self_attn.k_proj.weight.copy_(unpermute(layer.self_attn.k_proj.weight, cfg.num_key_value_heads))
        control = hf_loss(broken, val_tokens)
        print(f"control without the rotary permutation: {control:.6f} (diff {abs(control - want):.2g}, must exceed tol)")
        ok = ok and abs(control - want) > args.tol

        saved = os.path.join(tmp, "saved")
        model.float().save_pretrained(saved)
        back = os.path.join(tmp, "back.ckpt")
        subprocess.run([args.llmcc, "export", "--ckpt", saved, "--format", "llmcc", "--out", back],
                       check=True, capture_output=True)
        again = llmcc_eval(args.llmcc, back, val)
        print(f"save_pretrained -> llmcc export -> llmcc eval: {again:.6f} ({'same' if again == want else 'DIFFERENT'})")
        ok = ok and again == want

        scaled = os.path.join(tmp, "scaled")
        os.makedirs(scaled)
        with open(os.path.join(hf, "config.json")) as f:
            config = json.load(f)
        config["rope_scaling"] = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
        with open(os.path.join(scaled, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        os.symlink(os.path.join(hf, "model.safetensors"), os.path.join(scaled, "model.safetensors"))
        ours = llmcc_eval(args.llmcc, scaled, val)
        theirs = hf_loss(transformers.LlamaForCausalLM.from_pretrained(scaled).double().eval(), val_tokens)
        print(f"llama3 rope scaling (original 16, factor 4): llmcc eval {ours:.6f}, transformers {theirs:.6f}, "
              f"diff {abs(ours - theirs):.2g}; unscaled {want:.6f} (diff {abs(ours - want):.2g}, must exceed tol)")
        ok = ok and abs(ours - theirs) <= args.tol and abs(ours - want) > args.tol
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
