#!/usr/bin/env python3
"""LoRA parity fixtures for GPT-2: PEFT's adapters on transformers' GPT2LMHeadModel holding the
GPT-2 parity model's weights, their loss and gradients.

Writes tests/fixtures/lora_gpt2/ (format in its README.md), read by
tests/models/test_lora_gpt2_parity.cpp. The base is tests/fixtures/gpt2/model.bin (scripts/
gpt2_reference.py's model, an llm.c file) loaded into transformers' GPT2LMHeadModel (its maps are
Conv1D layers, weights stored (in, out)); PEFT (from PyPI) puts LoRA adapters of rank 3 and alpha
5 on c_attn, c_proj (the attention's and the MLP's) and c_fc of both layers, with A and B drawn
from numpy's RandomState(20241130) so that B is not zero and every adapter carries gradient. The
adapters are written as peft's save_pretrained writes them (F32), and the gradient of the mean
loss on the GPT-2 fixture's batch (one target ignored) with respect to each adapter tensor is
computed by transformers + PEFT in float64, so the files hold the answer for the fp32 adapters.

    <torch venv>/bin/python3 scripts/lora_gpt2_reference.py           # rewrites the files
    <torch venv>/bin/python3 scripts/lora_gpt2_reference.py --check   # recomputes, compares, writes nothing
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
import torch.nn.functional as F
import transformers
from safetensors.numpy import load_file as load_safetensors
from safetensors.torch import save_file as save_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "..", "tests", "fixtures", "gpt2")
OUT = os.path.join(HERE, "..", "tests", "fixtures", "lora_gpt2")
RANK, ALPHA, SEED, STD = 3, 5.0, 20241130, 0.2
TARGETS = ["c_attn", "c_proj", "c_fc"]


def read_llmc(path):
    """The llm.c fp32 model file: its shape and tensors in llm.c's order."""
    raw = np.fromfile(path, dtype="<i4", count=256)
    assert raw[0] == 20240326 and raw[1] == 3, "an llm.c fp32 model file (version 3)"
    max_t, v, layers, heads, c, vp = (int(x) for x in raw[2:8])
    values = np.fromfile(path, dtype="<f4", offset=1024)
    shapes = [("wte", (vp, c)), ("wpe", (max_t, c)), ("ln1w", (layers, c)), ("ln1b", (layers, c)),
              ("qkvw", (layers, 3 * c, c)), ("qkvb", (layers, 3 * c)), ("attprojw", (layers, c, c)),
              ("attprojb", (layers, c)), ("ln2w", (layers, c)), ("ln2b", (layers, c)),
              ("fcw", (layers, 4 * c, c)), ("fcb", (layers, 4 * c)), ("fcprojw", (layers, c, 4 * c)),
              ("fcprojb", (layers, c)), ("lnfw", (c,)), ("lnfb", (c,))]
    tensors, at = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape))
        tensors[name] = values[at:at + n].reshape(shape)
        at += n
    assert at == values.size, "the file holds exactly these tensors"
    return dict(max_t=max_t, v=v, layers=layers, heads=heads, c=c), tensors


def base_model(dtype):
    shape, t = read_llmc(os.path.join(BASE, "model.bin"))
    config = transformers.GPT2Config(vocab_size=shape["v"], n_positions=shape["max_t"], n_embd=shape["c"],
                                     n_layer=shape["layers"], n_head=shape["heads"], layer_norm_epsilon=1e-5,
                                     activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0, tie_word_embeddings=True,
                                     bos_token_id=shape["v"] - 1, eos_token_id=shape["v"] - 1)
    model = transformers.GPT2LMHeadModel(config)
    model.config._attn_implementation = "eager"
    sd = {"transformer.wte.weight": t["wte"][:shape["v"]], "transformer.wpe.weight": t["wpe"],
          "transformer.ln_f.weight": t["lnfw"], "transformer.ln_f.bias": t["lnfb"]}
    for l in range(shape["layers"]):
        p = f"transformer.h.{l}."
        # transformers' Conv1D keeps weights (in, out): llm.c's (out, in) transposed.
        sd.update({p + "ln_1.weight": t["ln1w"][l], p + "ln_1.bias": t["ln1b"][l],
                   p + "attn.c_attn.weight": t["qkvw"][l].T, p + "attn.c_attn.bias": t["qkvb"][l],
                   p + "attn.c_proj.weight": t["attprojw"][l].T, p + "attn.c_proj.bias": t["attprojb"][l],
                   p + "ln_2.weight": t["ln2w"][l], p + "ln_2.bias": t["ln2b"][l],
                   p + "mlp.c_fc.weight": t["fcw"][l].T, p + "mlp.c_fc.bias": t["fcb"][l],
                   p + "mlp.c_proj.weight": t["fcprojw"][l].T, p + "mlp.c_proj.bias": t["fcprojb"][l]})
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()},
                                                strict=False)
    assert not unexpected and all(k in ("lm_head.weight",) or k.endswith(".attn.bias") or
                                  k.endswith(".attn.masked_bias") for k in missing), (missing, unexpected)
    model.tie_weights()
    return model.to(dtype).eval()


def batch():
    raw = np.fromfile(os.path.join(BASE, "batch.bin"), dtype="<i4")
    b, t = int(raw[0]), int(raw[1])
    idx = raw[2:2 + b * t].reshape(b, t)
    targets = raw[2 + b * t:2 + 2 * b * t].reshape(b, t)
    return torch.from_numpy(idx.astype(np.int64)), torch.from_numpy(targets.astype(np.int64))


def lora_config():
    return peft.LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0, bias="none",
                           fan_in_fan_out=True, task_type="CAUSAL_LM")


def adapted(adapters, dtype):
    model = peft.get_peft_model(base_model(dtype), lora_config())
    params = {n: p for n, p in model.named_parameters() if "lora_" in n}
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(adapters[name.replace(".default", "")]).to(dtype))
    return model, params


def loss_of(model, idx, targets):
    logits = model(idx).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="recompute and compare with the files; write nothing")
    args = ap.parse_args()
    idx, targets = batch()

    model = peft.get_peft_model(base_model(torch.float32), lora_config())
    rng = np.random.RandomState(SEED)
    adapters = {}
    for name, p in model.named_parameters():
        if "lora_" in name:
            adapters[name.replace(".default", "")] = (rng.standard_normal(tuple(p.shape)) * STD).astype(np.float32)

    base_loss = loss_of(base_model(torch.float64), idx, targets).item()
    exact, params = adapted(adapters, torch.float64)
    loss = loss_of(exact, idx, targets)
    loss.backward()
    grads = {n.replace(".default", ""): p.grad.detach().to(torch.float32).numpy() for n, p in params.items()}
    print(f"lora_gpt2_reference: loss {loss.item():.9f} with the adapters, {base_loss:.9f} without (float64)")

    with tempfile.TemporaryDirectory() as tmp:
        float32_model, _ = adapted(adapters, torch.float32)
        float32_model.save_pretrained(tmp)
        with open(os.path.join(tmp, "adapter_config.json")) as f:
            config = json.load(f)
        config["base_model_name_or_path"] = "../gpt2/model.bin"  # the base beside these fixtures
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
            print("lora_gpt2_reference: the fixtures match")
            return
        os.makedirs(OUT, exist_ok=True)
        shutil.copy(os.path.join(tmp, "adapter_model.safetensors"), os.path.join(OUT, "adapter_model.safetensors"))
        with open(os.path.join(OUT, "adapter_config.json"), "w") as f:
            json.dump(config, f, indent=2, sort_keys=True)
            f.write("\n")
    save_safetensors({n: torch.from_numpy(g) for n, g in grads.items()}, os.path.join(OUT, "grads.safetensors"),
                     metadata={"format": "pt"})
    with open(os.path.join(OUT, "reference.txt"), "w") as f:
        f.write(f"alpha={ALPHA:g}\nbase_loss={base_loss:.17g}\nloss={loss.item():.17g}\nrank={RANK}\nseed={SEED}\n")
    print(f"lora_gpt2_reference: wrote {os.path.normpath(OUT)}")


if __name__ == "__main__":
    sys.exit(main())
