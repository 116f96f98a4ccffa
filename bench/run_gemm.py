#!/usr/bin/env python3
"""Runs bench_gemm_<lib> for several libraries interleaved (round r runs every library once,
so load changes on a shared machine hit all of them alike) and prints a Markdown table of the
median GFLOP/s per library, the ratio of each library to the first one, and the threads the
library was seen using.

  bench/run_gemm.py --build build --rounds 5 --libs onednn openblas openblas_noenv blis

`openblas_noenv` is the OpenBLAS executable run as `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`
(OpenBLAS's own CPU detection, as users get it)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def command(build, lib, args):
    exe = os.path.join(build, "bench", "bench_gemm_" + lib.replace("_noenv", ""))
    cmd = [exe, "--benchmark_format=json", "--benchmark_min_time=%g" % args.min_time]
    if args.filter:
        cmd.append("--benchmark_filter=" + args.filter)
    if lib.endswith("_noenv"):
        cmd = ["env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE"] + cmd
    return cmd


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.3)
    p.add_argument("--filter", default="")
    p.add_argument("--libs", nargs="+", default=["onednn", "openblas", "openblas_noenv", "blis"])
    p.add_argument("--json-out", default="")
    args = p.parse_args()

    results = {}  # (name, lib) -> list of GFLOPS
    busy = {}  # (name, lib) -> set of threads_busy
    errors = {}
    loads = []
    for r in range(args.rounds):
        for lib in args.libs:
            loads.append(os.getloadavg()[0])
            cmd = command(args.build, lib, args)
            print("round %d: %s" % (r + 1, " ".join(cmd)), file=sys.stderr, flush=True)
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            for b in json.loads(out)["benchmarks"]:
                name = b["name"].replace("/real_time", "")
                if b.get("error_occurred"):
                    errors[(name, lib)] = b.get("error_message", "error")
                    continue
                results.setdefault((name, lib), []).append(b["GFLOPS"])  # already GFLOP/s
                busy.setdefault((name, lib), set()).add(int(b["threads_busy"]))
    loads.append(os.getloadavg()[0])

    names = []
    for (name, _lib) in results:
        if name not in names:
            names.append(name)
    base = args.libs[0]
    head = "| pass/layer | M | threads | " + " | ".join(args.libs) + " | " + \
        " | ".join("%s/%s" % (l, base) for l in args.libs[1:]) + " |"
    print(head)
    print("|" + "---|" * (3 + 2 * len(args.libs) - 1))
    for name in names:
        parts = name.split("/")
        med = {l: statistics.median(results[(name, l)]) for l in args.libs if (name, l) in results}
        cells = []
        for l in args.libs:
            if l in med:
                seen = busy[(name, l)]
                mark = "" if seen == {int(parts[3].split(":")[1])} else " (threads %s)" % sorted(seen)
                cells.append("%.1f%s" % (med[l], mark))
            else:
                cells.append(errors.get((name, l), "n/a"))
        ratios = ["%.2f" % (med[l] / med[base]) if l in med and base in med else "n/a" for l in args.libs[1:]]
        print("| %s | %s | %s | %s | %s |" % (parts[0] + "/" + parts[1], parts[2].split(":")[1],
                                              parts[3].split(":")[1], " | ".join(cells), " | ".join(ratios)))
    print("\nload average (1 min) during the run: min %.2f, max %.2f; rounds %d; %s" %
          (min(loads), max(loads), args.rounds, time.strftime("%Y-%m-%d %H:%M:%S")))
    if errors:
        print("\nERRORS:")
        for k, v in errors.items():
            print("  %s %s: %s" % (k[1], k[0], v))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"%s|%s" % k: v for k, v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
