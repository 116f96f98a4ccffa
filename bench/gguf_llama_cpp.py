#!/usr/bin/env python3
"""llmcc's GGUF files in llama.cpp itself (llama-cpp-python, built from source): logits, token ids
and perplexity against llmcc's own, for every family llama.cpp has an architecture for.

For each family's smallest preset with GPT-2's vocabulary (50257 tokens): a random-initialised
model (one step at learning rate 0) and a model trained here on Tiny Shakespeare (--steps), each
exported with `llmcc export --format gguf` in f32, f16, q8_0, q4_0 and q4_k_m. Then, in the same
run:

* logits: the first --seq-len tokens of the validation split through llama.cpp (f32 and f16
  files) and through `llmcc eval --logits-out`: max |difference| / max |llmcc logit|;
* token ids: llama.cpp's tokenizer (the file's vocabulary and merges) against `llmcc tokenize` on
  the validation split's text;
* perplexity on the validation split (--windows windows of --seq-len tokens, 0 for all of them,
  each predicting its next tokens, as `llmcc eval --batch-size 1` reads them): llama.cpp's per quantization against
  llmcc's fp32.

With --check the run fails unless logits agree within 1e-3 relative (f32, f16), token ids are
equal, and the trained models' perplexities are within 1% (q8_0) and 5% (q4_0, q4_k_m) of
llmcc's. The slow ctest gguf.llama_cpp runs it that way.

  bench/setup_llama_cpp.sh    # the venv: ~/.cache/llmcc/venv-gguf
  ~/.cache/llmcc/venv-gguf/bin/python3 bench/gguf_llama_cpp.py --llmcc build/llmcc [--check]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from llama_cpp import Llama

QUANTS = ["f32", "f16", "q8_0", "q4_0", "q4_k_m"]
PPL_BOUND = {"f32": 0.01, "f16": 0.01, "q8_0": 0.01, "q4_0": 0.05, "q4_k_m": 0.05}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"gguf_llama_cpp: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def shard_tokens(path):
    """An llm.c token file's ids."""
    raw = open(path, "rb").read()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    return np.frombuffer(raw[1024:], dtype="<u2" if header[1] == 1 else "<u4").astype(np.int64)


def mean_nll(logits, targets):
    m = logits.max(1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(1)) + m[:, 0]
    return float((lse - logits[np.arange(len(targets)), targets]).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmcc", required=True)
    ap.add_argument("--data", default=None, help="Tiny Shakespeare's input.txt (default: the shared data)")
    ap.add_argument("--work", default=None, help="working directory (default: a temporary one)")
    ap.add_argument("--steps", type=int, default=300, help="training steps of the trained models")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--windows", type=int, default=64,
                    help="validation windows for the perplexity (0: every window of the split)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--check", action="store_true", help="fail unless every figure is within its bound")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    data = args.data or next((p for p in [
        os.path.join(os.environ.get("LLMCC_SHARED_DATA", ""), "tinyshakespeare/input.txt"),
        os.path.join(here, "..", "..", "shared", "data", "tinyshakespeare", "input.txt")] if os.path.exists(p)), None)
    if data is None:
        sys.exit("gguf_llama_cpp: Tiny Shakespeare not found: give --data or run scripts/fetch_data.sh")
    work = args.work or tempfile.mkdtemp(prefix="gguf_llama_cpp_")
    os.makedirs(work, exist_ok=True)
    L, T = args.llmcc, args.seq_len
    run([L, "prepare", "--input", data, "--out", os.path.join(work, "data")])
    train_bin, val_bin = (os.path.join(work, "data", f) for f in ("train_000000.bin", "val_000000.bin"))
    val = shard_tokens(val_bin)
    windows = args.windows or (len(val) - 1) // T
    presets = ["gpt2-tiny", "llama-tiny", "qwen3-tiny"]
    ok = True
    failures = []

    text = open(data, encoding="utf-8").read()

    rows = []
    for preset in presets:
        for kind in ("random", "trained"):
            run_dir = os.path.join(work, f"{preset}-{kind}")
            steps = 1 if kind == "random" else args.steps
            extra = ["--lr", "0", "--min-lr", "0"] if kind == "random" else ["--lr", "3e-3", "--min-lr", "3e-4"]
            t0 = time.time()
            run([L, "train", "--model", preset, "--vocab-size", "50257", "--train-data", train_bin, "--val-data",
                 val_bin, "--out-dir", run_dir, "--steps", str(steps), "--batch-size", "8", "--seq-len", str(T),
                 "--val-every", "0", "--sample-every", "0", "--threads", str(args.threads), "--seed", "1"] + extra)
            ckpt = os.path.join(run_dir, f"ckpt_{steps:06d}.bin")
            train_s = time.time() - t0
            # llmcc's reference figures: the logits of the first window, and the loss over the windows.
            npy = os.path.join(work, f"{preset}-{kind}.logits.npy")
            out = run([L, "eval", "--ckpt", ckpt, "--val-data", val_bin, "--batch-size", "1", "--seq-len", str(T),
                       "--steps", str(windows), "--json", "--logits-out", npy, "--threads", str(args.threads)])
            ref_loss = json.loads(out.strip().splitlines()[-1])["loss"]
            ref_logits = np.load(npy)[0].astype(np.float64)  # (T, V)
            for quant in QUANTS:
                path = os.path.join(work, f"{preset}-{kind}.{quant}.gguf")
                t0 = time.time()
                run([L, "export", "--ckpt", ckpt, "--format", "gguf", "--quant", quant, "--out", path])
                export_s = time.time() - t0
                # The windows as llmcc eval reads them: tokens [i T, (i + 1) T] predict the next T.
                llm = Llama(model_path=path, logits_all=True, n_ctx=max(T, 64), n_batch=max(T, 64),
                            n_threads=args.threads, verbose=False)
                nll = 0.0
                for w in range(windows):
                    ids = val[w * T:(w + 1) * T + 1]
                    llm.reset()
                    llm.eval(list(map(int, ids[:T])))
                    logits = np.array(llm.scores[:T], dtype=np.float64)
                    if w == 0:
                        rel = float(np.abs(logits - ref_logits).max() / np.abs(ref_logits).max())
                    nll += mean_nll(logits, ids[1:T + 1])
                ppl_ratio = float(np.exp(nll / windows) / np.exp(ref_loss))
                tokens_equal = None
                if quant == "f32" and kind == "random":
                    # Token ids of all of Tiny Shakespeare: llama.cpp's tokenizer from the file's
                    # vocabulary and merges against llmcc's.
                    theirs = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
                    ours = [int(x) for x in run([L, "tokenize", "--file", data]).split("\n")[0].split()]
                    tokens_equal = theirs == ours
                    if not tokens_equal:
                        first = next(i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b) if any(
                            a != b for a, b in zip(theirs, ours)) else min(len(theirs), len(ours))
                        failures.append(f"{preset}: llama.cpp's token ids differ from llmcc's at {first} "
                                        f"({len(theirs)} against {len(ours)} ids)")
                del llm
                rows.append((preset, kind, quant, os.path.getsize(path), export_s, rel, ppl_ratio, tokens_equal,
                             train_s))
                if quant in ("f32", "f16") and rel > 1e-3:
                    failures.append(f"{preset} {kind} {quant}: logits differ by {rel:.3g} relative")
                if kind == "trained" and abs(ppl_ratio - 1) > PPL_BOUND[quant]:
                    failures.append(f"{preset} {kind} {quant}: perplexity {ppl_ratio:.4f}x llmcc's")
                print(f"{preset:11s} {kind:7s} {quant:6s} {os.path.getsize(path) / 1e6:8.2f} MB  export "
                      f"{export_s:5.2f} s  logits max rel {rel:.2e}  perplexity {ppl_ratio:.4f}x llmcc's "
                      f"(llmcc {np.exp(ref_loss):.2f})" + ("" if tokens_equal is None else
                                                           f"  token ids {'equal' if tokens_equal else 'DIFFER'}"),
                      flush=True)
    if failures:
        print("\n".join("FAILED: " + f for f in failures))
        ok = False
    print("result: " + ("ok" if ok else "failed"))
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
