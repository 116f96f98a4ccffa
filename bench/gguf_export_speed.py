#!/usr/bin/env python3
"""GGUF export of a downloaded-style model folder: llmcc against llama.cpp's own converter.

The folder is bench/hf_load_memory.py's (a randomly initialised model of a real configuration,
bf16 shards with model.safetensors.index.json; made there if missing), with GPT-2's tokenizer
beside it (vocab.json, merges.txt) so that both sides have a vocabulary to write; the converter
needs sentencepiece in the venv (it imports it before it looks for a BPE vocabulary). Each side runs in
a process of its own, in turn, --rounds times, measured by wall time and the kernel's peak
resident size of that child:

  llmcc export --ckpt <folder> --format gguf --quant f16|q8_0 --out <file>
  python convert_hf_to_gguf.py <folder> --outtype f16|q8_0 --outfile <file>   (llama.cpp's, from
      the llama-cpp-python source distribution that bench/setup_llama_cpp.sh unpacks)

and prints the best round of each with the output's size and the largest tensor in fp32 (the
issue's memory bound: 1.25 x the output + one fp32 tensor).

  <torch venv>/bin/python3 bench/gguf_export_speed.py --llmcc build/llmcc [--model llama-3.2-1b]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import hf_load_memory


def measured(cmd, env=None):
    """(seconds, peak resident bytes) of cmd run as a child of its own."""
    t0 = time.time()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execvpe(cmd[0], cmd, env or os.environ)
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        sys.exit(f"gguf_export_speed: {' '.join(cmd)} failed (status {status}); run it by hand to see why")
    return time.time() - t0, usage.ru_maxrss * 1024


def largest_tensor_bytes(folder):
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        index = json.load(f)
    best = 0
    for shard in sorted(set(index["weight_map"].values())):
        with open(os.path.join(folder, shard), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        for name, info in header.items():
            if name != "__metadata__":
                count = 1
                for d in info["shape"]:
                    count *= d
                best = max(best, 4 * count)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmcc", required=True)
    ap.add_argument("--model", default="llama-3.2-1b", choices=sorted(hf_load_memory.MODELS))
    ap.add_argument("--work", default=os.path.join(os.path.expanduser("~"), ".cache", "llmcc", "hf-bench"))
    ap.add_argument("--gguf-venv", default=os.path.join(os.path.expanduser("~"), ".cache", "llmcc", "venv-gguf"))
    ap.add_argument("--gpt2-dir", default=None, help="GPT-2's encoder.json and vocab.bpe (default: the shared data)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quants", default="f16,q8_0")
    args = ap.parse_args()
    folder = os.path.join(args.work, args.model)
    if not os.path.exists(os.path.join(folder, "model.safetensors.index.json")):
        print(f"gguf_export_speed: making {folder}", flush=True)
        hf_load_memory.make_folder(args.model, folder)
    here = os.path.dirname(os.path.abspath(__file__))
    gpt2 = args.gpt2_dir or os.path.join(here, "..", "..", "shared", "data", "gpt2")
    if not os.path.exists(os.path.join(folder, "vocab.json")):
        # GPT-2's tokenizer as its Hugging Face repository holds it (vocab.json, merges.txt), which
        # llama.cpp's converter recognises as "gpt-2".
        for src, dst in (("encoder.json", "vocab.json"), ("vocab.bpe", "merges.txt")):
            shutil.copyfile(os.path.join(gpt2, src), os.path.join(folder, dst))
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>",
                       "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}, f)
    converter = os.path.join(args.gguf_venv, "llama.cpp", "convert_hf_to_gguf.py")
    if not os.path.exists(converter):
        sys.exit(f"gguf_export_speed: {converter} missing: run bench/setup_llama_cpp.sh")
    env = dict(os.environ, PYTHONPATH=os.path.join(args.gguf_venv, "llama.cpp", "gguf-py"))
    out = os.path.join(args.work, f"{args.model}.gguf")
    fp32_tensor = largest_tensor_bytes(folder)
    print(f"{args.model}: largest tensor {fp32_tensor / 2**30:.2f} GiB in fp32; {args.rounds} rounds, best shown",
          flush=True)
    for quant in args.quants.split(","):
        best = {}
        for _ in range(args.rounds):
            for side, cmd in (("llmcc", [args.llmcc, "export", "--ckpt", folder, "--format", "gguf", "--quant", quant,
                                         "--tokenizer", "gpt2:" + gpt2, "--out", out]),
                              ("llama.cpp convert_hf_to_gguf.py",
                               [sys.executable, converter, folder, "--outtype", quant, "--outfile", out])):
                seconds, peak = measured(cmd, env)
                size = os.path.getsize(out)
                os.remove(out)
                if side not in best or seconds < best[side][0]:
                    best[side] = (seconds, peak, size)
        for side, (seconds, peak, size) in best.items():
            bound = 1.25 * size + fp32_tensor
            print(f"{quant:5s} {side:32s} {seconds:7.1f} s  peak {peak / 2**30:6.2f} GiB  output "
                  f"{size / 2**30:5.2f} GiB  (bound 1.25 x output + fp32 tensor: {bound / 2**30:.2f} GiB)", flush=True)
        a, b = best["llmcc"][0], best["llama.cpp convert_hf_to_gguf.py"][0]
        print(f"result: quant={quant} llmcc_s={a:.1f} converter_s={b:.1f} speedup={b / a:.2f} "
              f"llmcc_peak_gib={best['llmcc'][1] / 2**30:.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
