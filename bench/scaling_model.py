#!/usr/bin/env python3
"""Step time of data-parallel training on N nodes, modelled from one bench/scaling.sh run.

    python3 bench/scaling_model.py LOG_DIR [--alpha-us 5] [--gbits 10,25,100,200,400]
                                           [--nodes 2,8,32,128,512]

Measured (LOG_DIR from bench/scaling.sh, round 1):
  np2x1      compute per rank: the median step minus the ranks' mean exposed communication
  np2x1-mpi  the last step's bucket timeline: each bucket's bytes and when the backward had
             finished it (ms after the step's forward began), and when the backward ended
Modelled: one rank per node; each node's link carries its collectives one after another at
BW bytes/s each way with alpha seconds per message, and communication takes no compute time
(an offloading NIC). Ring collectives on b bytes over N nodes:
  all-reduce       2 (N-1)/N b / BW + 2 (N-1) alpha
  reduce-scatter     (N-1)/N b / BW +   (N-1) alpha   (all-gather the same)
The timeline ends when the last gradient is final, and is scaled to the compute measured
without MPI's progress overhead. A bucket's
collective starts when its gradients are final and the link is free; what runs past the end of
the backward is exposed. ZeRO-1 (llmcc's default) reduce-scatters during the backward and
all-gathers the updated weights after AdamW, which is exposed in full; --zero 0 all-reduces.
Prints step time and exposed share for both, the local batch at which ZeRO-1's communication
is 10% of the step, and per-rank memory with and without ZeRO-1.
"""
import argparse
import json
import re
import statistics
import sys


def read_run(log_dir, side):
    base = f"{log_dir}/{side}.1"
    steps = [json.loads(l) for l in open(base + "/log.jsonl") if '"loss"' in l][2:]
    text = open(base + ".txt", errors="replace").read()
    return statistics.median(s["ms"] for s in steps), text


def main():
    p = argparse.ArgumentParser()
    p.add_argument("log_dir")
    p.add_argument("--alpha-us", type=float, default=5.0)
    p.add_argument("--gbits", default="10,25,100,200,400")
    p.add_argument("--nodes", default="2,8,32,128,512")
    a = p.parse_args()

    step_ms, text = read_run(a.log_dir, "np2x1")
    m = re.search(r"exposed communication of step: (.*)", text)
    exposed = [float(x) for x in re.findall(r"rank \d+ ([\d.]+) of", m.group(1))] if m else [0.0]
    compute_ms = step_ms - statistics.mean(exposed)
    params = float(re.search(r"([\d.]+)M parameters", text).group(1)) * 1e6

    _, text = read_run(a.log_dir, "np2x1-mpi")
    m = re.search(r"buckets started at \(ms after its forward began, MB\): ([^;]*); backward ended at (\d+) ms", text)
    if not m:
        sys.exit("scaling_model.py: no bucket timeline in np2x1-mpi.1.txt")
    buckets = [(float(t), float(mb) * 1e6) for t, mb in (x.split(":") for x in m.group(1).split())]
    # The backward's compute ends when its last gradient is final; the trainer's "backward ended"
    # comes later by the MPI progress work done in the last notifications, which a NIC that
    # offloads the collectives would not cost.
    end_ms = max(t for t, _ in buckets)
    # The measured step has AdamW and the reduction after the backward; the timeline's end is the
    # backward's. Scale the timeline so that forward + backward fill the compute time less AdamW's
    # share (AdamW on half the weights, measured as the difference of the runs is noisy: 5%).
    scale = 0.95 * compute_ms / end_ms
    buckets = [(t * scale / 1e3, b) for t, b in buckets]
    end_s = end_ms * scale / 1e3
    total_bytes = sum(b for _, b in buckets)
    tokens = None
    m = re.search(r"batch: (\d+) x (\d+) tokens", text)
    if m:
        tokens = int(m.group(1)) * int(m.group(2)) // 2  # per rank

    alpha = a.alpha_us * 1e-6

    def exposed_s(n, bw, zero, stretch=1.0):
        # stretch scales compute (a larger local batch): bucket times and the backward's end.
        free = 0.0
        per = lambda b, k: k * (n - 1) / n * b / bw + k * (n - 1) * alpha
        k = 1 if zero else 2
        for t, b in buckets:
            free = max(free, t * stretch) + per(b, k)
        out = max(0.0, free - end_s * stretch)
        if zero:
            out += per(total_bytes, 1)  # the all-gather of the updated weights
        return out

    gbits = [float(x) for x in a.gbits.split(",")]
    nodes = [int(x) for x in a.nodes.split(",")]
    print(f"measured: compute {compute_ms:.0f} ms per step per rank ({tokens} tokens per rank), "
          f"{len(buckets)} buckets, {total_bytes / 1e6:.0f} MB of gradients, the last "
          f"{buckets[-1][1] / 1e6:.0f} MB final when the backward ends; alpha {a.alpha_us:g} us")
    for zero in (True, False):
        print()
        print(f"step time in ms (exposed communication, % of step), {'ZeRO-1' if zero else '--zero 0 (all-reduce)'}:")
        print("| nodes | " + " | ".join(f"{g:g} Gbit/s" for g in gbits) + " |")
        print("| --- |" + " --- |" * len(gbits))
        for n in nodes:
            cells = []
            for g in gbits:
                e = exposed_s(n, g * 1e9 / 8, zero)
                step = compute_ms / 1e3 + e
                cells.append(f"{step * 1e3:.0f} ({100 * e / step:.0f}%)")
            print(f"| {n} | " + " | ".join(cells) + " |")
    print()
    print("tokens per rank per step at which ZeRO-1's exposed communication falls to 10% of the step:")
    print("| nodes | " + " | ".join(f"{g:g} Gbit/s" for g in gbits) + " |")
    print("| --- |" + " --- |" * len(gbits))
    for n in nodes:
        cells = []
        for g in gbits:
            stretch = 1.0
            while stretch < 4096:
                e = exposed_s(n, g * 1e9 / 8, True, stretch)
                if e <= 0.1 * (compute_ms / 1e3 * stretch + e):
                    break
                stretch *= 1.1
            cells.append(f"{tokens * stretch:,.0f}" if tokens else f"x{stretch:.1f}")
        print(f"| {n} | " + " | ".join(cells) + " |")
    print()
    print("memory per rank in GiB (fp32 weights, gradients, AdamW's two moments; activations not included):")
    print("| ranks | without ZeRO-1 | ZeRO-1 |")
    print("| --- | --- | --- |")
    gib = 4 * params / 2**30
    for n in [1, 2, 8, 64, 512]:
        print(f"| {n} | {gib * 4:.2f} | {gib * 2 + gib * 2 / n:.2f} |")


if __name__ == "__main__":
    main()
