#!/usr/bin/env python3
"""LoRA parity fixtures: PEFT's adapters on the Llama parity model, their loss and gradients.

Writes tests/fixtures/lora/ (format in its README.md), read by tests/models/test_lora_parity.cpp.
The base is tests/fixtures/llama (scripts/llama_reference.py's model, loaded from its files); PEFT
(from PyPI) puts LoRA adapters of rank 3 and alpha 5 on every projection (q, k, v, o, gate, up,
down) of both layers, with A and B drawn from numpy's RandomState(20241129) so that B is not zero
and every adapter carries gradient. The adapters are written as peft's save_pretrained writes them
(F32), and the gradient of the mean loss on the Llama fixture's batch with respect to each adapter
tensor is computed by transformers + PEFT in float64 with llama_reference.py's exact float64
RMSNorm and rotary parts, so the files hold the answer for the fp32 adapters.

    <torch venv>/bin/python3 scripts/lora_reference.py           # rewrites the files
    <torch venv>/bin/python3 scripts/lora_reference.py --check   # recomputes, compares, writes nothing
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import peft
import torch
from safetensors.numpy import load_file as load_safetensors
from safetensors.torch import save_file as save_safetensors

import llama_reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "..", "tests", "fixtures", "llama")
OUT = os.path.join(HERE, "..", "tests", "fixtures", "lora")
RANK, ALPHA, SEED, STD = 3, 5.0, 20241129, 0.2
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def batch():
    raw = np.fromfile(os.path.join(BASE, "batch.bin"), dtype="<i4")
    b, t = int(raw[0]), int(raw[1])
    idx = raw[2:2 + b * t].reshape(b, t)
    targets = raw[2 + b * t:2 + 2 * b * t].reshape(b, t)
    return torch.from_numpy(idx.astype(np.int64)), torch.from_numpy(targets.astype(np.int64))


def adapted(weights, adapters, dtype, exact):
    """The base built as llama_reference.py builds it, wrapped by PEFT with the given adapters."""
    model = ref.build(weights, dtype, ref.ROPE_THETA, ref.NORM_EPS, exact)
    config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0, bias="none",
                             task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, config)
    params = {n: p for n, p in model.named_parameters() if "lora_" in n}
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(adapters[name.replace(".default", "")]).to(dtype))
    return model, params


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="recompute and compare with the files; write nothing")
    args = ap.parse_args()
    weights = load_safetensors(os.path.join(BASE, "model.safetensors"))
    idx, targets = batch()

    # The adapters' values: every lora_A and lora_B of the PEFT model, in its parameter order.
    model = peft.get_peft_model(ref.build(weights, torch.float32, ref.ROPE_THETA, ref.NORM_EPS, False),
                                peft.LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0,
                                                bias="none", task_type="CAUSAL_LM"))
    rng = np.random.RandomState(SEED)
    adapters = {}
    for name, p in model.named_parameters():
        if "lora_" in name:
            adapters[name.replace(".default", "")] = (rng.standard_normal(tuple(p.shape)) * STD).astype(np.float32)

    exact, params = adapted(weights, adapters, torch.float64, True)
    loss = ref.loss_of(exact(idx).logits, targets)
    loss.backward()
    grads = {n.replace(".default", ""): p.grad.detach().to(torch.float32).numpy() for n, p in params.items()}

    shipped, shipped_params = adapted(weights, adapters, torch.float32, False)
    loss32 = ref.loss_of(shipped(idx).logits, targets)
    loss32.backward()
    worst = max(float(np.max(np.abs(shipped_params[n].grad.numpy() - grads[n.replace(".default", "")])) /
                      np.max(np.abs(grads[n.replace(".default", "")]))) for n in shipped_params)
    print(f"lora_reference: loss {loss.item():.9f} (float64); transformers + PEFT in float32 as shipped: loss "
          f"{loss32.item():.9f}, worst gradient {worst:.1e} relative to its tensor's largest")

    with tempfile.TemporaryDirectory() as tmp:
        float32_model, _ = adapted(weights, adapters, torch.float32, False)
        float32_model.save_pretrained(tmp)
        with open(os.path.join(tmp, "adapter_config.json")) as f:
            config = json.load(f)
        config["base_model_name_or_path"] = "../llama"  # the base beside these fixtures
        written = load_safetensors(os.path.join(tmp, "adapter_model.safetensors"))
        assert set(written) == set(adapters), sorted(set(written) ^ set(adapters))
        for n, a in written.items():
            assert np.array_equal(a, adapters[n]), n
        if args.check:
            stored = load_safetensors(os.path.join(OUT, "grads.safetensors"))
            for n, g in grads.items():
                rel = float(np.max(np.abs(stored[n] - g)) / np.max(np.abs(g)))
                assert rel < 1e-6, f"{n}: stored gradient differs by {rel:.1e}"
            with open(os.path.join(OUT, "reference.txt")) as f:
                kv = dict(line.strip().split("=", 1) for line in f if "=" in line)
            assert abs(float(kv["loss"]) - loss.item()) < 1e-9, kv["loss"]
            print("lora_reference: the fixtures match")
            return
        os.makedirs(OUT, exist_ok=True)
        shutil.copy(os.path.join(tmp, "adapter_model.safetensors"), os.path.join(OUT, "adapter_model.safetensors"))
        with open(os.path.join(OUT, "adapter_config.json"), "w") as f:
            json.dump(config, f, indent=2, sort_keys=True)
            f.write("\n")
    save_safetensors({n: torch.from_numpy(g) for n, g in grads.items()}, os.path.join(OUT, "grads.safetensors"),
                     metadata={"format": "pt"})
    with open(os.path.join(OUT, "reference.txt"), "w") as f:
        f.write(f"alpha={ALPHA:g}\nloss={loss.item():.17g}\nrank={RANK}\nseed={SEED}\n")
    print(f"lora_reference: wrote {os.path.normpath(OUT)}")


if __name__ == "__main__":
    sys.exit(main())
