"""What the transformers reference scripts (llama_reference.py, qwen3_reference.py) share.

Each builds a small model as transformers' own class and makes three spots that transformers
computes in float32 even in a float64 model exact (RMSNorm's normalisation, the rotary angles,
eager attention's softmax: sdpa attention, and the other two replaced per module instance); runs
logits, loss, every gradient and 10 AdamW steps; and writes or checks the fixture files
(config.json, model.safetensors, grads.safetensors, batch.bin, logits.bin, reference.txt).
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from safetensors.numpy import load_file as load_safetensors
from safetensors.torch import save_file as save_safetensors

# AdamW as llmcc's include/llmcc/train/adamw.h applies it: decay on tensors with ndim >= 2 only.
LR, BETAS, EPS, WEIGHT_DECAY = 3e-3, (0.9, 0.95), 1e-8, 0.1
STEPS = 10


def rmsnorm_float64(module, x):
    """The RMSNorm forward (Llama's, Qwen3's) without its round trip through float32."""
    return module.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + module.variance_epsilon))


def make_exact(model, norm_class, norms):
    """Replaces, on this model's instances only, the float32 parts: the rotary angles and each of
    the `norms` instances of norm_class."""
    cfg = model.config
    hs = cfg.head_dim
    inv_freq = 1.0 / cfg.rope_parameters["rope_theta"] ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)

    def rotary(x, position_ids):  # the default rope type's forward (scaling 1) in float64
        freqs = position_ids[..., None].to(torch.float64) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    assert cfg.rope_parameters["rope_type"] == "default", cfg.rope_parameters
    assert getattr(model.model.rotary_emb, "attention_scaling", 1.0) == 1.0, model.model.rotary_emb.attention_scaling
    assert cfg._attn_implementation == "sdpa", cfg._attn_implementation  # eager's softmax is float32
    layer_types = getattr(cfg, "layer_types", None)
    assert layer_types is None or set(layer_types) == {"full_attention"}, layer_types  # no sliding window
    model.model.rotary_emb.forward = rotary
    found = [m for m in model.modules() if isinstance(m, norm_class)]
    assert len(found) == norms, len(found)
    for m in found:
        m.forward = rmsnorm_float64.__get__(m)
    return model


def load_weights(model, weights, dtype):
    """The model with `weights` (Hugging Face names -> float32 arrays) copied in, in `dtype`."""
    params = dict(model.named_parameters())  # a tied head is embed_tokens, listed once under that name
    assert set(params) == set(weights), sorted(set(params) ^ set(weights))
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(weights[name]))
    return model.to(dtype).train()  # no dropout in these models; train() only enables autograd bookkeeping


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


def run(build, idx, targets, undecayed):
    """Logits, loss and gradients at the initial weights, then STEPS AdamW steps on the same batch.

    build() makes the model afresh; `undecayed` is how many of its parameters are not matrices
    (the norm gains), which AdamW does not decay."""
    model = build()
    logits = model(idx).logits  # (B, T, V)
    loss = loss_of(logits, targets)
    loss.backward()
    out = {"logits": logits.detach().clone(), "loss": loss.item(),
           "grads": {n: p.grad.detach().clone() for n, p in model.named_parameters()}}

    model = build()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    assert len(no_decay) == undecayed, len(no_decay)
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


def hf_logits(model_class, exact, model_dir, idx):
    """Logits of a model directory as transformers loads it (float64, sdpa, made exact by
    exact(model))."""
    model = model_class.from_pretrained(model_dir, attn_implementation="sdpa")
    model = exact(model.double().eval())
    with torch.no_grad():
        return model(idx).logits


def exported_logits(llmcc, ckpt_dir, model_class, exact, idx):
    """`llmcc export --format safetensors` of ckpt_dir, loaded by transformers: (its logits, its
    config)."""
    with tempfile.TemporaryDirectory() as tmp:
        exported = os.path.join(tmp, "exported")
        subprocess.run([llmcc, "export", "--ckpt", ckpt_dir, "--format", "safetensors", "--out", exported],
                       check=True, capture_output=True)
        return hf_logits(model_class, exact, exported, idx), transformers.AutoConfig.from_pretrained(exported)


def config_json(hf, architecture):
    """config.json as save_pretrained writes it (non-default keys), less the transformers version."""
    hf.architectures, hf.dtype = [architecture], "float32"
    config = json.loads(hf.to_json_string(use_diff=True))
    config.pop("transformers_version", None)
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()


def fixture_files(config, weights, idx_np, tgt_np, ref, kv):
    """File name -> contents (bytes, or name -> array for the safetensors files). kv: the model's
    keys of reference.txt; the run's are added."""
    B, T = idx_np.shape
    files = {
        "config.json": config,
        "model.safetensors": weights,
        "grads.safetensors": {n: g.to(torch.float32).numpy() for n, g in ref["grads"].items()},
        "batch.bin": np.array([B, T], dtype="<i4").tobytes() + idx_np.astype("<i4").tobytes()
                     + tgt_np.astype("<i4").tobytes(),
        "logits.bin": ref["logits"].to(torch.float32).numpy().astype("<f4").tobytes(),
    }
    kv = dict(kv)
    kv.update({
        "loss": repr(ref["loss"]),
        "adamw.lr": repr(LR), "adamw.beta1": repr(BETAS[0]), "adamw.beta2": repr(BETAS[1]),
        "adamw.eps": repr(EPS), "adamw.weight_decay": repr(WEIGHT_DECAY),
        "adamw.losses": " ".join(repr(x) for x in ref["losses"]),
        "adamw.final_loss": repr(ref["final_loss"]),
    })
    files["reference.txt"] = "".join(f"{k}={kv[k]}\n" for k in sorted(kv)).encode()
    return files


def check_files(out_dir, files, text_keys=("model.family", "generator")):
    """Compares the files with those in out_dir; prints one line per file. True when all agree.

    Another torch version may round the last float64 bit differently: numbers must agree to 1e-6
    relative (far below the tests' 1e-4), token ids and weights exactly. reference.txt's
    text_keys are not numbers: they are compared as text, except the family and the generator's
    description, which are not compared."""
    ok = True
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
                texts = set(text_keys) - {"model.family", "generator"}
                same = a.keys() == b.keys() and all(a[k] == b[k] for k in texts) and all(
                    a[k] == b[k] or np.allclose(np.array(a[k].split(), dtype=float),
                                                np.array(b[k].split(), dtype=float), rtol=1e-6, atol=0)
                    for k in a if k not in text_keys)
            elif name == "batch.bin":
                same = exact
            else:
                x, y = np.frombuffer(old, dtype="<f4"), np.frombuffer(data, dtype="<f4")
                same = x.shape == y.shape and np.abs(x - y).max() <= 1e-6 * np.abs(y).max()
        print(f"{name}: {'identical' if exact else 'agrees' if same else 'DIFFERS'}")
        ok = ok and same
    return ok


def write_files(out_dir, files):
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
