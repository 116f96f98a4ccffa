#!/usr/bin/env python3
"""Runs bench_gemm_<lib> for several libraries interleaved (each benchmark runs for every
library back to back, each with --benchmark_repetitions, so load changes on a shared machine
hit all of them alike)
and prints a Markdown table of GFLOP/s per library (the median over rounds of each round's
median over repetitions), the ratio of each library to the first one, and the threads a
library was seen using when that differs from the threads asked for.

  bench/run_gemm.py --build build --rounds 2 --repetitions 3 --libs onednn openblas openblas_noenv blis

`openblas_noenv` is the OpenBLAS executable run as `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`
(OpenBLAS's own CPU detection, as users get it)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def command(build, lib, args, only=None, list_only=False):
    exe = os.path.join(build, "bench", "bench_gemm_" + lib.replace("_noenv", ""))
    if list_only:
        return [exe, "--benchmark_list_tests=true"] + (["--benchmark_filter=" + args.filter] if args.filter else [])
    cmd = [exe, "--benchmark_format=json", "--benchmark_min_time=%g" % args.min_time,
           "--benchmark_repetitions=%d" % args.repetitions, "--benchmark_report_aggregates_only=true"]
    if only:
        cmd.append("--benchmark_filter=^%s$" % only)
    if lib.endswith("_noenv"):
        cmd = ["env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE"] + cmd
    return cmd


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--min-time", type=float, default=0.3)
    p.add_argument("--filter", default="")
    p.add_argument("--libs", nargs="+", default=["onednn", "openblas", "openblas_noenv", "blis"])
    p.add_argument("--json-out", default="")
    args = p.parse_args()

    results = {}  # (name, lib) -> list of GFLOPS
    busy = {}  # (name, lib) -> set of threads_busy
    errors = {}
    loads = []
    # One benchmark at a time, every library back to back, so that each ratio compares runs
    # made seconds apart even when the load of a shared machine drifts over minutes.
    listing = subprocess.run(command(args.build, args.libs[0], args, list_only=True), check=True,
                             capture_output=True, text=True).stdout.split()
    for r in range(args.rounds):
        for bench in listing:
            for lib in args.libs:
                loads.append(os.getloadavg()[0])
                cmd = command(args.build, lib, args, only=bench)
                print("round %d: %s" % (r + 1, " ".join(cmd)), file=sys.stderr, flush=True)
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                for b in json.loads(out)["benchmarks"]:
                    name = b["run_name"].replace("/real_time", "")
                    if b.get("error_occurred"):
                        errors[(name, lib)] = b.get("error_message", "error")
                        continue
                    if b.get("aggregate_name") != "median":
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
