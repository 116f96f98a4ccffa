#!/usr/bin/env python3
"""LoRA fine-tuning steps: llmcc against PyTorch + PEFT on the same model folder, CPU, threads and
LoRA settings, in the same run.

The folder is bench/hf_load_memory.py's (a randomly initialised model of a real configuration,
bf16 shards), made there if missing. Both sides train adapters of rank --rank (alpha --alpha, no
dropout) on every attention and MLP projection over the frozen base, on one fixed random batch of
B sequences of T tokens, with AdamW and the gradient's norm clipped to 1 (a training step as
`llmcc train` takes it); each runs in a process of its own, and its peak resident size
is that child's ru_maxrss. PyTorch runs eager (transformers + peft.get_peft_model) with the base
in fp32 or, with --dtype bf16, under CPU autocast to bf16; llmcc runs `llmcc bench --init-from`
with the same --dtype. Each configuration runs once per round, in turn; its best round counts.

  <torch venv>/bin/python3 bench/peft_lora_speed.py --llmcc build/llmcc [--model llama-3.2-1b]

The venv is bench/setup_pytorch.sh's (torch, transformers, peft).
"""
import argparse
import os
import re
import resource
import subprocess
import sys

import hf_load_memory

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

PEFT_STEPS = r"""
import json, resource, sys, time
import torch, transformers, peft
folder, B, T, rank, alpha, steps, warmup, threads, dtype, targets = sys.argv[1:]
B, T, rank, steps, warmup, threads = int(B), int(T), int(rank), int(steps), int(warmup), int(threads)
torch.set_num_threads(threads)
torch.manual_seed(1337)
model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
model.config.use_cache = False
config = peft.LoraConfig(r=rank, lora_alpha=float(alpha), lora_dropout=0.0, target_modules=targets.split(","),
                         task_type="CAUSAL_LM")
model = peft.get_peft_model(model, config)
model.train()
trainable = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.0)
x = torch.randint(0, model.config.vocab_size, (B, T + 1), generator=torch.Generator().manual_seed(1338))
inputs, labels = x[:, :-1], x[:, 1:]
def step():
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        logits = model(input_ids=inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=False)
    return float(loss)
for _ in range(warmup):
    step()
ms = []
for _ in range(steps):
    t0 = time.perf_counter()
    loss = step()
    ms.append((time.perf_counter() - t0) * 1e3)
import statistics
print(json.dumps(dict(median_ms=statistics.median(ms), min_ms=min(ms), loss=loss,
                      trainable=sum(p.numel() for p in trainable))))
"""


def child_rss_mib():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def run_peft(args, folder):
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: each side runs in a fresh
    # interpreter of its own (below), so the figure is that child's.
    out = subprocess.run([sys.executable, "-c", PEFT_STEPS, folder, str(args.batch_size), str(args.seq_len),
                          str(args.rank), str(args.alpha), str(args.steps), str(args.warmup), str(args.threads),
                          args.dtype, ",".join(TARGETS)], check=True, capture_output=True, text=True)
    import json
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_llmcc(args, folder):
    cmd = [args.llmcc, "bench", "--init-from", folder, "--batch-size", str(args.batch_size), "--seq-len",
           str(args.seq_len), "--lora-rank", str(args.rank), "--lora-alpha", str(args.alpha), "--threads",
           str(args.threads), "--dtype", args.dtype, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--no-profile"] + args.llmcc_flag
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    m = re.search(r"^result: (.*)$", out.stdout, re.M)
    if m is None:
        sys.exit(f"no result line in llmcc's output:\n{out.stdout}\n{out.stderr}")
    fields = dict(kv.split("=", 1) for kv in m.group(1).split())
    memory = re.search(r"^memory plan: .*$", out.stdout, re.M)
    return dict(median_ms=float(fields["median_ms"]), min_ms=float(fields["min_ms"]),
                rss_mib=float(fields["peak_rss_mib"]), plan=memory.group(0) if memory else "")


def measured(fn, args, folder):
    """Runs fn in a grandchild so that RUSAGE_CHILDREN names that process alone."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            result = fn(args, folder)
            result["rss_mib"] = child_rss_mib()
            os.write(w, repr(result).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.waitpid(pid, 0)
    if not data:
        sys.exit(f"{fn.__name__} failed")
    return eval(data.decode())  # our own repr of a dict of numbers and strings


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmcc", required=True)
    ap.add_argument("--model", default="smollm2-360m", choices=sorted(hf_load_memory.MODELS))
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--llmcc-flag", action="append", default=[],
                    help="one more flag for llmcc bench (repeatable), e.g. --llmcc-flag=--checkpoint-activations")
    ap.add_argument("--work", default=os.path.join(os.path.expanduser("~"), ".cache", "llmcc", "hf-bench"))
    args = ap.parse_args()
    folder = os.path.join(args.work, args.model)
    if not os.path.exists(os.path.join(folder, "config.json")):
        print(f"making {folder}", flush=True)
        hf_load_memory.make_folder(args.model, folder)

    import peft
    import torch
    import transformers
    print(f"{args.model}: B={args.batch_size} T={args.seq_len}, LoRA rank {args.rank} alpha {args.alpha:g} on "
          f"{','.join(TARGETS)}, AdamW, {args.threads} threads, {args.dtype}; torch {torch.__version__}, "
          f"transformers {transformers.__version__}, peft {peft.__version__}", flush=True)
    best = {}
    for rnd in range(args.rounds):
        for name, fn in (("pytorch+peft", run_peft), ("llmcc", run_llmcc)):
            res = measured(fn, args, folder)
            print(f"round {rnd + 1} {name}: {res['median_ms']:.1f} ms/step (min {res['min_ms']:.1f}), "
                  f"peak RSS {res['rss_mib']:.0f} MiB", flush=True)
            if name not in best or res["median_ms"] < best[name]["median_ms"]:
                rss = min(res["rss_mib"], best[name]["rss_mib"]) if name in best else res["rss_mib"]
                best[name] = dict(res, rss_mib=rss)
            else:
                best[name]["rss_mib"] = min(best[name]["rss_mib"], res["rss_mib"])
    if best["llmcc"].get("plan"):
        print(best["llmcc"]["plan"])
    tokens = args.batch_size * args.seq_len
    for name in ("pytorch+peft", "llmcc"):
        b = best[name]
        print(f"{name:13s} {b['median_ms']:9.1f} ms/step {tokens / b['median_ms'] * 1e3:8.1f} tokens/s "
              f"peak RSS {b['rss_mib']:7.0f} MiB")
    speed = best["pytorch+peft"]["median_ms"] / best["llmcc"]["median_ms"]
    rss = best["llmcc"]["rss_mib"] / best["pytorch+peft"]["rss_mib"]
    print(f"llmcc / pytorch+peft: {speed:.2f}x tokens/s, {rss:.2f}x peak RSS")
    print(f"result: model={args.model} B={args.batch_size} T={args.seq_len} rank={args.rank} dtype={args.dtype} "
          f"speedup={speed:.3f} rss_ratio={rss:.3f}")


if __name__ == "__main__":
    main()
