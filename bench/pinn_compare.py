#!/usr/bin/env python3
"""The Burgers PINN training step (examples/pinn_burgers: u_t, u_x and u_xx in the loss, Adam),
llmcc against PyTorch on the same CPU in the same run: bench_pinn_burgers and bench/pinn_torch.py's
eager (autograd.grad with create_graph), func (torch.func.jvp) and compile (torch.compile of the
func step) forms, each in a process of its own, in turn, for --rounds rounds. Prints each one's
best median ms per step over the rounds, its peak resident size, and llmcc's speed relative to
each (and to the fastest PyTorch form).

  <torch venv>/bin/python3 bench/pinn_compare.py --bench build/bench/bench_pinn_burgers [--rounds 3]

The venv is bench/setup_pytorch.sh's.
"""
import argparse
import json
import os
import subprocess
import sys


def cpu_line():
    model = "unknown CPU"
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    avx = ", ".join(sorted(f for f in flags if f in ("avx512f", "avx512_bf16", "amx_bf16", "avx2"))) or "no AVX"
    return f"{model} ({avx}), {os.cpu_count()} logical CPUs"


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]}
    for line in reversed(out.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": "no result line"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", required=True, help="build/bench/bench_pinn_burgers")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--points", type=int, default=10000)
    ap.add_argument("--data", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", default="eager,func,compile")
    a = ap.parse_args()
    common = ["--points", str(a.points), "--data", str(a.data), "--steps", str(a.steps), "--threads", str(a.threads)]
    torch_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pinn_torch.py")
    cmds = {"llmcc": [a.bench] + common}
    for v in a.variants.split(","):
        cmds["torch-" + v] = [sys.executable, torch_script, "--variant", v] + common
    best = {}
    for r in range(a.rounds):
        for name, cmd in cmds.items():
            res = run(cmd)
            if "error" in res:
                print(f"round {r + 1}: {name}: failed ({res['error']})", flush=True)
                best.setdefault(name, res)
                continue
            print(f"round {r + 1}: {name}: {res['median_ms']:.1f} ms/step (best step {res['best_ms']:.1f}), "
                  f"peak RSS {res['peak_rss_mib']:.0f} MiB", flush=True)
            if "median_ms" not in best.get(name, {}) or res["median_ms"] < best[name]["median_ms"]:
                best[name] = res
    print(f"\nBurgers PINN step: {a.points} collocation + {a.data} data points, 2-64-64-64-1 tanh, Adam, fp32, "
          f"{a.threads} threads; {cpu_line()}")
    print(f"{'':14} {'ms/step':>9} {'peak RSS MiB':>13} {'llmcc speed-up':>15}")
    ours = best.get("llmcc", {}).get("median_ms")
    fastest = None
    for name, res in best.items():
        if "median_ms" not in res:
            print(f"{name:14} {'failed':>9}   {res.get('error', '')}")
            continue
        ratio = f"{res['median_ms'] / ours:.2f}x" if ours and name != "llmcc" else ""
        print(f"{name:14} {res['median_ms']:9.1f} {res['peak_rss_mib']:13.0f} {ratio:>15}")
        if name != "llmcc" and (fastest is None or res["median_ms"] < best[fastest]["median_ms"]):
            fastest = name
    if ours and fastest:
        print(f"llmcc against the fastest PyTorch form ({fastest}): {best[fastest]['median_ms'] / ours:.2f}x the speed, "
              f"{best['llmcc']['peak_rss_mib'] / best[fastest]['peak_rss_mib']:.2f}x the peak RSS")


if __name__ == "__main__":
    main()
