#!/usr/bin/env python3
"""Runs the nested-differentiation fuzzer: for each seed, gen_nested.py writes a batch of random
programs (jvps inside losses, to the second order), adgen generates their forward and reverse
derivatives, the driver is compiled with the project's compiler and flags and run
(nested_check.h). Failing batches are kept in --keep-failures.

  run_nested.py --adgen EXE --build-info FILE --seeds A:B [--count K] --work DIR [--jobs N]
                [--keep-failures DIR]

The last line is `N passed, F failed` over all programs.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import sys

from run_fuzz import HERE, read_build_info, run

GEN = os.path.join(HERE, "gen_nested.py")


def one_seed(a, seed, cxx, flags, libs, adgen_flags):
    d = os.path.join(a.work, "nested_%d" % seed)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    log = []
    steps = [
        ("generator", [sys.executable, GEN, "--seed", str(seed), "--count", str(a.count), "--out-dir", d]),
        ("adgen", [a.adgen, "batch.h", "--out-header", "batch.grad.h", "--out-source", "batch.grad.cpp", "--"] +
         adgen_flags),
        ("compile", [cxx] + flags + ["-I" + d, "-c", "batch.grad.cpp", "-o", "g.o"]),
        ("compile", [cxx] + flags + ["-I" + d, "-c", "batch_main.cpp", "-o", "m.o"]),
        ("link", [cxx, "g.o", "m.o", "-o", "nested"] + libs),
    ]
    for kind, cmd in steps:
        rc, out = run(cmd, cwd=d)
        if rc != 0:
            log.append("FAIL seed=%d kind=%s:\n%s" % (seed, kind, "\n".join(out.splitlines()[:25])))
            return a.count, a.count, log, d
    rc, out = run([os.path.join(d, "nested")], cwd=d, timeout=900)
    fails = [l for l in out.splitlines() if l.startswith("FAIL")]
    log.extend(fails)
    m = re.search(r"nested: (\d+) programs, (\d+) checks \((\d+) unsettled\)", out)
    if rc not in (0, 1) or not m:
        log.append("FAIL seed=%d kind=crash: exit %d after:\n%s" % (seed, rc, "\n".join(out.splitlines()[-5:])))
        return a.count, a.count, log, d
    bad = len({int(x) for x in re.findall(r"^FAIL seed=\d+ program=(\d+)", out, re.M)})
    log.append("seed %d: %s programs, %s checks (%s unsettled), %d failing programs" % (
        seed, m.group(1), m.group(2), m.group(3), bad))
    return a.count, bad, log, d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--adgen", required=True)
    ap.add_argument("--build-info", required=True)
    ap.add_argument("--seeds", required=True, help="A:B, the seeds A..B-1")
    ap.add_argument("--count", type=int, default=8, help="programs per batch (one adgen run)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--keep-failures")
    a = ap.parse_args()
    info = read_build_info(a.build_info)
    src = info["SOURCE_DIR"][0]
    cxx = info["CXX"][0]
    flags = (["-std=c++20", "-O1", "-Werror"] + info.get("CXX_FLAGS", []) +
             ["-I" + d for d in info.get("INCLUDES", [])] + ["-I" + HERE])
    libs = info.get("LIBS", [])
    adgen_flags = ["-std=c++20", "-I%s/include" % src]
    lo, hi = (int(x) for x in a.seeds.split(":"))
    total = failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = [pool.submit(one_seed, a, s, cxx, flags, libs, adgen_flags) for s in range(lo, hi)]
        for fut in futures:
            n, bad, log, d = fut.result()
            total += n
            failed += bad
            for line in log:
                print(line, flush=True)
            if bad and a.keep_failures:
                dest = os.path.join(a.keep_failures, os.path.basename(d))
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(d, dest)
    print("%d passed, %d failed" % (total - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
