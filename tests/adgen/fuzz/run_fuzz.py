#!/usr/bin/env python3
"""Runs the adgen fuzzer: for each seed, generates a batch of random programs inside adgen's
subset (gen_programs.py), runs adgen on it, compiles the generated driver with the project's
compiler and flags (from the build-info file CMake writes) and runs it (fuzz_check.h's checks);
then generates programs just outside the subset and checks that adgen rejects each one with a
located `error:` (exit code 1, no output written, no crash).

  run_fuzz.py --adgen EXE --build-info FILE --seeds A:B --programs-per-batch K
              --outside-per-batch J --work DIR [--plain-names] [--jobs N] [--keep-failures DIR]

A failing seed's batch (and each failing program as its own file) is copied to --keep-failures.
The last line is `N passed, F failed` over all programs (in-subset and outside).
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "gen_programs.py")


def read_build_info(path):
    """KEY=VALUE lines; list values are ';'-separated (CMake lists)."""
    info = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                info[k] = [x for x in v.split(";") if x]
    return info


def run(cmd, cwd=None, timeout=600):
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        return -999, "timeout after %ss: %s\n%s" % (timeout, " ".join(cmd), e.stdout or "")


class Fuzzer:
    def __init__(self, args):
        self.args = args
        info = read_build_info(args.build_info)
        self.src = info["SOURCE_DIR"][0]
        self.cxx = info["CXX"][0]
        self.flags = (["-std=c++20", "-O0", "-Werror", "-DFUZZ_POISON"] + info.get("CXX_FLAGS", []) +
                      ["-I" + d for d in info.get("INCLUDES", [])] + ["-I" + HERE])
        self.libs = info.get("LIBS", [])
        self.adgen_flags = ["-I%s/include" % self.src, "-I%s/src" % self.src, "-I%s/tests/adgen" % self.src]

    def adgen(self, header, out_h, out_cpp, cwd):
        return run([self.args.adgen, header, "--out-header", out_h, "--out-source", out_cpp, "--root", self.src,
                    "--"] + self.adgen_flags, cwd=cwd, timeout=300)

    def isolate(self, d, count, log):
        """Runs adgen and a syntax check on each program alone: which ones fail."""
        bad = []
        for i in range(count):
            rc, out = self.adgen("p%d.h" % i, "p%d.grad.h" % i, "p%d.grad.cpp" % i, d)
            if rc == 0:
                rc, out = run([self.cxx] + self.flags + ["-I" + d, "-fsyntax-only", "p%d.grad.cpp" % i], cwd=d)
            if rc != 0:
                bad.append(i)
                log.append("  program %d alone:\n%s" % (i, "\n".join(out.splitlines()[:12])))
        return bad

    def in_subset(self, seed, log, timing):
        """Returns (programs, checkpointed pairs, failing program indices)."""
        a, k = self.args, self.args.programs_per_batch
        d = os.path.join(a.work, "seed_%d" % seed)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        cmd = [sys.executable, GEN, "--seed", str(seed), "--count", str(k), "--out-dir", d]
        if a.plain_names:
            cmd.append("--plain-names")
        rc, out = run(cmd)
        if rc != 0:
            log.append("FAIL seed=%d kind=generator\n%s" % (seed, out))
            return k, k, list(range(k))
        t0 = time.time()
        rc, out = self.adgen("batch.h", "batch.grad.h", "batch.grad.cpp", d)
        timing["adgen"] += time.time() - t0
        if rc != 0:
            log.append("FAIL seed=%d kind=adgen (exit %d) on an in-subset batch:\n%s" % (
                seed, rc, "\n".join(out.splitlines()[:20])))
            return k, k, self.isolate(d, k, log) or list(range(k))
        t0 = time.time()
        for src in ("batch.grad.cpp", "batch_main.cpp"):
            rc, out = run([self.cxx] + self.flags + ["-I" + d, "-c", src, "-o", src + ".o"], cwd=d)
            if rc != 0:
                log.append("FAIL seed=%d kind=compile %s:\n%s" % (seed, src, "\n".join(out.splitlines()[:20])))
                timing["compile"] += time.time() - t0
                return k, k, self.isolate(d, k, log) or list(range(k))
        rc, out = run([self.cxx, "batch.grad.cpp.o", "batch_main.cpp.o", "-o", "fuzz"] + self.libs, cwd=d)
        timing["compile"] += time.time() - t0
        if rc != 0:
            log.append("FAIL seed=%d kind=link:\n%s" % (seed, out))
            return k, k, list(range(k))
        t0 = time.time()
        rc, out = run([os.path.join(d, "fuzz")], cwd=d, timeout=900)
        timing["run"] += time.time() - t0
        stats = re.search(r"(\d+) finite-difference checks \((\d+) unsettled, in (\d+) rough runs\), (\d+) runs too ill-conditioned", out)
        if stats:
            timing["fd"] += int(stats.group(1))
            timing["unsettled"] += int(stats.group(2))
            timing["rough"] += int(stats.group(3))
            timing["ill"] += int(stats.group(4))
        bad = sorted({int(m) for m in re.findall(r"^FAIL seed=\d+ program=(\d+)", out, re.M)})
        fails = [l for l in out.splitlines() if l.startswith("FAIL")]
        log.extend(fails)
        if rc not in (0, 1) or (rc == 1 and not fails):
            log.append("FAIL seed=%d kind=crash: the driver exited with %d after:\n%s" % (
                seed, rc, "\n".join(out.splitlines()[-5:])))
            done = len(re.findall(r"^fuzz: ", out, re.M))
            if not done:
                bad = bad or list(range(k))
        return k, k, bad

    def outside(self, seed, log):
        """Returns (programs, failing program indices)."""
        a, j = self.args, self.args.outside_per_batch
        if j == 0:
            return 0, []
        d = os.path.join(a.work, "outside_%d" % seed)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        cmd = [sys.executable, GEN, "--outside", "--seed", str(seed), "--count", str(j), "--out-dir", d]
        if a.plain_names:
            cmd.append("--plain-names")
        rc, out = run(cmd)
        if rc != 0:
            log.append("FAIL seed=%d kind=generator --outside\n%s" % (seed, out))
            return j, list(range(j))
        constructs = dict(l.split(" ", 1) for l in open(os.path.join(d, "outside.txt")).read().splitlines())
        # Every program must be valid C++ (so adgen's rejection is about its subset): one compiler
        # run checks them all (their names carry the program's prefix), and only when it fails is
        # each program checked alone to name the invalid one.
        with open(os.path.join(d, "all_outside.cpp"), "w") as f:
            f.write("".join('#include "o%d.h"\n' % i for i in range(j)))
        rc, _ = run([self.cxx] + self.flags + ["-I" + d, "-fsyntax-only", "all_outside.cpp"], cwd=d)
        all_valid = rc == 0
        bad = []
        for i in range(j):
            name = "o%d.h" % i
            what = constructs.get(name, "?")
            rc, out = (0, "") if all_valid else run([self.cxx] + self.flags + ["-fsyntax-only", "-x", "c++", name], cwd=d)
            if rc != 0:
                bad.append(i)
                log.append("FAIL seed=%d outside=%d kind=outside-syntax (%s): not valid C++:\n%s" % (
                    seed, i, what, "\n".join(out.splitlines()[:10])))
                continue
            out_h, out_cpp = "o%d.grad.h" % i, "o%d.grad.cpp" % i
            rc, out = self.adgen(name, out_h, out_cpp, d)
            problems = []
            if rc != 1:
                problems.append("exit code %d (expected 1)" % rc)
            if not re.search(r"%s:\d+:\d+: error: " % re.escape(name), out):
                problems.append("no `%s:line:col: error:` in the output" % name)
            if os.path.exists(os.path.join(d, out_h)) or os.path.exists(os.path.join(d, out_cpp)):
                problems.append("an output file was written")
            if problems:
                bad.append(i)
                log.append("FAIL seed=%d outside=%d kind=outside (%s): %s\n%s" % (
                    seed, i, what, "; ".join(problems), "\n".join(out.splitlines()[:10])))
        return j, bad

    def seed(self, seed):
        log, timing = [], {"adgen": 0.0, "compile": 0.0, "run": 0.0, "fd": 0, "unsettled": 0, "rough": 0, "ill": 0}
        n, pairs, bad = self.in_subset(seed, log, timing)
        o, obad = self.outside(seed, log)
        keep = self.args.keep_failures
        if keep and (bad or obad):
            dst = os.path.join(keep, "seed_%d" % seed)
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(dst)
            src = os.path.join(self.args.work, "seed_%d" % seed)
            for f in ["batch.h", "batch_main.cpp"] + ["p%d.h" % i for i in bad]:
                if os.path.exists(os.path.join(src, f)):
                    shutil.copy(os.path.join(src, f), dst)
            for i in obad:
                shutil.copy(os.path.join(self.args.work, "outside_%d" % seed, "o%d.h" % i), dst)
            with open(os.path.join(dst, "failures.txt"), "w") as f:
                f.write("\n".join(log) + "\n")
        return dict(seed=seed, n=n, pairs=pairs, bad=bad, o=o, obad=obad, log=log, timing=timing)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adgen", required=True)
    ap.add_argument("--build-info", required=True)
    ap.add_argument("--seeds", required=True, help="A:B, half-open")
    ap.add_argument("--programs-per-batch", type=int, default=6)
    ap.add_argument("--outside-per-batch", type=int, default=4)
    ap.add_argument("--work", required=True)
    ap.add_argument("--plain-names", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--keep-failures")
    args = ap.parse_args()
    # Steps run in the batch's folder: every path given is made absolute first.
    for name in ("adgen", "build_info", "work", "keep_failures"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    a, b = (int(x) for x in args.seeds.split(":"))
    os.makedirs(args.work, exist_ok=True)
    fuzzer = Fuzzer(args)
    start = time.time()
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for r in pool.map(fuzzer.seed, range(a, b)):
            results.append(r)
            t = r["timing"]
            status = "ok" if not (r["bad"] or r["obad"]) else "FAILED programs %s outside %s" % (r["bad"], r["obad"])
            print("seed %d: %s (adgen %.1fs, compile %.1fs, run %.1fs)" % (
                r["seed"], status, t["adgen"], t["compile"], t["run"]))
            for line in r["log"]:
                print(line)
            sys.stdout.flush()
    n = sum(r["n"] for r in results)
    pairs = sum(r["pairs"] for r in results)
    o = sum(r["o"] for r in results)
    failed = sum(len(r["bad"]) + len(r["obad"]) for r in results)
    fd = sum(r["timing"]["fd"] for r in results)
    ill = sum(r["timing"]["ill"] for r in results)
    print("fuzz: seeds %d..%d, %d programs (%d checkpointed pairs), %d outside-subset programs, %d failures, %.0f s"
          % (a, b - 1, n, pairs, o, failed, time.time() - start))
    unsettled = sum(r["timing"]["unsettled"] for r in results)
    rough = sum(r["timing"]["rough"] for r in results)
    print("fuzz: %d finite-difference checks, %d of them on a loss too rough at the smallest step to judge (%d rough "
          "runs of %d); %d runs with a primal loss too large or not finite to check" % (fd, unsettled, rough, 2 * n, ill))
    print("%d passed, %d failed" % (n + o - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
