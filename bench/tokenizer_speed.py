#!/usr/bin/env python3
"""tokenizer.json encoding speed, llmcc against the `tokenizers` library (Rust), one thread each.

Makes a Llama 3-style byte-level BPE tokenizer.json with `tokenizers` (Llama 3's split pattern,
ignore_merges, trained on Tiny Shakespeare to --vocab tokens), then encodes Tiny Shakespeare and a
--mb MB text (Tiny Shakespeare repeated) with each, best of --rounds, each round from an empty
cache, and prints MB/s, the ratio, and whether the ids are identical.

  <torch venv>/bin/python3 bench/tokenizer_speed.py --build build [--mb 100]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(root, "build"), help="llmcc build directory (bench_hf_tokenizer)")
    ap.add_argument("--text", default=os.path.join(root, "..", "shared", "data", "tinyshakespeare", "input.txt"))
    ap.add_argument("--mb", type=int, default=100, help="size of the large text")
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    bench = os.path.join(args.build, "bench", "bench_hf_tokenizer")
    if not os.access(bench, os.X_OK):
        sys.exit(f"{bench} is missing: cmake --build {args.build} --target bench_hf_tokenizer")
    with open(args.text, encoding="utf-8") as f:
        small = f.read()
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([small], trainers.BpeTrainer(
        vocab_size=args.vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|begin_of_text|>", "<|end_of_text|>"], show_progress=False))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokenizer.json")
        tok.save(path)
        large = small * max(1, args.mb * 1_000_000 // len(small.encode()))
        for name, text in (("tiny shakespeare", small), (f"{args.mb} MB", large)):
            file = os.path.join(tmp, "text.txt")
            with open(file, "w", encoding="utf-8") as f:
                f.write(text)
            nbytes = len(text.encode())
            best = 1e30
            for _ in range(args.rounds):
                fresh = Tokenizer.from_file(path)  # an empty cache, as llmcc's rounds
                t0 = time.perf_counter()
                theirs = fresh.encode(text, add_special_tokens=False).ids
                best = min(best, time.perf_counter() - t0)
            # tokenizers is faster on many short texts than on one long one (its per-string alignment
            # bookkeeping): the same text as paragraphs through encode_batch, on one thread too.
            paragraphs = [p + "\n\n" for p in text.split("\n\n")]
            best_batch = 1e30
            for _ in range(args.rounds):
                fresh = Tokenizer.from_file(path)
                t0 = time.perf_counter()
                fresh.encode_batch(paragraphs, add_special_tokens=False)
                best_batch = min(best_batch, time.perf_counter() - t0)
            out = subprocess.run([bench, path, file, str(args.rounds)], check=True, capture_output=True,
                                 text=True).stdout
            fields = dict(kv.split("=") for kv in out.split("result: ")[1].split())
            ours_mb = float(fields["mb_per_s"])
            theirs_mb = nbytes / 1e6 / best
            batch_mb = nbytes / 1e6 / best_batch
            ids = subprocess.run([os.path.join(args.build, "llmcc"), "tokenize", "--tokenizer", "hf:" + path,
                                  "--ordinary", "--file", file], check=True, capture_output=True,
                                 text=True).stdout.split() if nbytes < 5_000_000 else None
            same = "ids identical" if ids is not None and list(map(int, ids)) == theirs else (
                "ids not compared (large)" if ids is None else "IDS DIFFER")
            print(f"{name}: {nbytes / 1e6:.1f} MB, {len(theirs)} tokens; llmcc {ours_mb:.2f} MB/s; tokenizers "
                  f"{theirs_mb:.2f} MB/s as one text, {batch_mb:.2f} MB/s as {len(paragraphs)} paragraphs "
                  f"(encode_batch); llmcc / the faster {ours_mb / max(theirs_mb, batch_mb):.2f}x; {same}")
            if int(fields["tokens"]) != len(theirs):
                sys.exit(f"token counts differ: llmcc {fields['tokens']}, tokenizers {len(theirs)}")


if __name__ == "__main__":
    main()
