#!/usr/bin/env python3
"""Plot llmcc's training tokens/s against PyTorch's, from docs/perf-data.csv, into
docs/img/perf-tokens-per-s.png (the figure at the top of docs/perf.md).

    python3 -m venv /tmp/venv-plot && /tmp/venv-plot/bin/pip install matplotlib
    /tmp/venv-plot/bin/python scripts/plot_perf.py [--data docs/perf-data.csv] [--out docs/img/perf-tokens-per-s.png]

The CSV holds the figures of docs/perf.md's current table, one row per bench/compare.sh run,
as measured (median ms/step over rounds). Tokens/s is B * T per step over that median; the
ratio printed above each pair is the one compare.sh printed (llmcc's tokens/s over the fastest
PyTorch mode's, by medians), checked here against the ms/step it came from. compare.sh records
only the fastest PyTorch mode of each run, so each run has one PyTorch bar, coloured by mode.
After a new compare.sh run: add its row to the CSV (and to docs/perf.md's table), rerun this.
"""
import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLORS = {"llmcc": "#1f77b4", "compile": "#ff7f0e", "eager": "#2ca02c"}
LABELS = {"llmcc": "llmcc", "compile": "PyTorch torch.compile", "eager": "PyTorch eager"}


def read_rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    rows = list(csv.DictReader(lines))
    if not rows:
        sys.exit(f"plot_perf.py: no rows in {path}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "docs", "perf-data.csv"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "img", "perf-tokens-per-s.png"))
    args = ap.parse_args()

    rows = read_rows(args.data)
    machines = sorted({(r["machine"], r["cpu"], r["pytorch"], r["threads"]) for r in rows})
    if len(machines) != 1:
        sys.exit(f"plot_perf.py: expected one machine in {args.data}, got {machines}")
    machine, cpu, pytorch, threads = machines[0]
    rows.sort(key=lambda r: (int(r["seq_len"]), r["run_utc"]))

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    width = 0.38
    seen = set()
    top = 0.0
    for i, r in enumerate(rows):
        tokens = int(r["batch"]) * int(r["seq_len"])
        ours = tokens * 1000.0 / float(r["llmcc_ms"])
        theirs = tokens * 1000.0 / float(r["pytorch_ms"])
        ratio = float(r["ratio_median"])
        if abs(ours / theirs - ratio) > 0.006:
            sys.exit(f"plot_perf.py: run {r['run_utc']}: ms/step give {ours / theirs:.3f}x, the CSV says {ratio}x")
        mode = r["pytorch_mode"]
        for x, value, key in ((i - width / 2, ours, "llmcc"), (i + width / 2, theirs, mode)):
            ax.bar(x, value, width, color=COLORS[key], label=None if key in seen else LABELS[key])
            seen.add(key)
        ax.text(i, ours + 4, f"{ratio:.2f}x", ha="center", va="bottom", fontsize=9, fontweight="bold")
        top = max(top, ours, theirs)

    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(
        [f"T={r['seq_len']}\n{r['run_utc'].split()[-1]}\n{r['build']}" for r in rows], fontsize=8)
    ax.set_ylabel("tokens/s (median step)")
    ax.set_ylim(0, top * 1.15)
    ax.set_title(
        f"GPT-2 124M fp32 training, B=4, {threads} threads: {machine}, {cpu}\n"
        f"llmcc against the fastest PyTorch {pytorch} mode of each compare.sh run; "
        f"ratios are llmcc's tokens/s over it",
        fontsize=9)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out} ({len(rows)} runs, {machine})")


if __name__ == "__main__":
    main()
