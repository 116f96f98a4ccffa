#!/usr/bin/env python3
"""Peak memory of using a checkpoint as people download it: llmcc against transformers.

Makes (once, cached under --work) a randomly initialised model of a real configuration, saved by
transformers' save_pretrained as bf16 shards with model.safetensors.index.json, as the Hub
publishes it. Then, each in a process of its own, measured by the kernel's peak resident size
(ru_maxrss of that child):

  llmcc eval --ckpt <folder>          the weights widened to fp32, one (1, T) window evaluated
  transformers, from_pretrained(<folder>, dtype=float32) and the same window's loss

and prints each peak against the model's fp32 weight size, with both losses (they must agree).

  <torch venv>/bin/python3 bench/hf_load_memory.py --llmcc build/llmcc [--model llama-3.2-1b]

The venv is bench/setup_pytorch.sh's (torch, transformers, safetensors). Making the 1B folder
takes about a minute and 2.5 GB of disk.
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys

T = 32
MODELS = {
    # Llama 3.2 1B: tied embeddings, llama3 rope scaling, 8 key/value heads.
    "llama-3.2-1b": ("LlamaForCausalLM", dict(
        model_type="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True, bos_token_id=128000,
        eos_token_id=128001, rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})),
    "smollm2-360m": ("LlamaForCausalLM", dict(
        model_type="llama", vocab_size=49152, hidden_size=960, intermediate_size=2560, num_hidden_layers=32,
        num_attention_heads=15, num_key_value_heads=5, max_position_embeddings=8192, rms_norm_eps=1e-5,
        rope_theta=100000.0, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)),
    "qwen3-0.6b": ("Qwen3ForCausalLM", dict(
        model_type="qwen3", vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True)),
}

TRANSFORMERS_LOSS = """
import sys, torch, torch.nn.functional as F, transformers
folder, tokens = sys.argv[1], [int(t) for t in sys.argv[2].split(",")]
torch.set_num_threads(2)
model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
x, y = torch.tensor([tokens[:-1]]), torch.tensor([tokens[1:]])
with torch.no_grad():
    logits = model(x).logits
print(float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))))
"""


def make_folder(name, folder):
    import torch
    import transformers
    arch, cfg = MODELS[name]
    config = transformers.AutoConfig.for_model(**cfg)
    torch.manual_seed(1)
    model = getattr(transformers, arch)._from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder, max_shard_size="1GB")


def run_measured(cmd):
    """Runs cmd as the only child waited for; returns (stdout, peak resident bytes)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        os.close(r)
        os.execvp(cmd[0], cmd)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed (status {status}); output:\n{out}")
    return out, usage.ru_maxrss * 1024


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmcc", required=True, help="the llmcc binary")
    ap.add_argument("--model", default="llama-3.2-1b", choices=sorted(MODELS))
    ap.add_argument("--work", default=os.path.join(os.path.expanduser("~"), ".cache", "llmcc", "hf-bench"),
                    help="where the folder is made once and kept")
    args = ap.parse_args()
    folder = os.path.join(args.work, args.model)
    index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.exists(index):
        print(f"making {folder} (transformers, random init, bf16 shards of at most 1GB)", flush=True)
        make_folder(args.model, folder)
    with open(index) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    stored = sum(os.path.getsize(os.path.join(folder, s)) for s in shards)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    params = 0
    for s in shards:  # element counts from the headers
        with open(os.path.join(folder, s), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        for k, v in header.items():
            if k != "__metadata__":
                count = 1
                for d in v["shape"]:
                    count *= d
                params += count
    fp32 = params * 4

    rng = random.Random(3)
    tokens = [rng.randrange(min(config["vocab_size"], 65535)) for _ in range(T + 1)]
    val = os.path.join(args.work, f"{args.model}-val.bin")
    with open(val, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))

    out, llmcc_peak = run_measured([args.llmcc, "eval", "--ckpt", folder, "--val-data", val, "--batch-size", "1",
                                    "--seq-len", str(T), "--threads", "2", "--json"])
    llmcc_loss = json.loads(out)["loss"]
    out, hf_peak = run_measured([sys.executable, "-c", TRANSFORMERS_LOSS, folder, ",".join(map(str, tokens))])
    hf_loss = float(out.strip().splitlines()[-1])

    print(f"{args.model}: {params / 1e9:.3f}G parameters stored in {len(shards)} bf16 shards ({gib(stored)}); "
          f"fp32 weights {gib(fp32)}")
    print(f"llmcc eval:             peak RSS {gib(llmcc_peak)} = {llmcc_peak / fp32:.3f}x the fp32 weights, "
          f"loss {llmcc_loss:.6f}")
    print(f"transformers (float32): peak RSS {gib(hf_peak)} = {hf_peak / fp32:.3f}x the fp32 weights, "
          f"loss {hf_loss:.6f}")
    print(f"result: model={args.model} params={params} fp32_bytes={fp32} llmcc_peak_rss={llmcc_peak} "
          f"llmcc_ratio={llmcc_peak / fp32:.4f} transformers_peak_rss={hf_peak} "
          f"transformers_ratio={hf_peak / fp32:.4f} loss_diff={abs(llmcc_loss - hf_loss):.2g}")


if __name__ == "__main__":
    main()
