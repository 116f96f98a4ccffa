#!/usr/bin/env bash
# A/B of llmcc's packed GEMM between two git revisions (or a revision and the working tree),
# alternating call by call in one process: see bench/gemm_ab.cpp for why.
#
#   bench/gemm_ab.sh REV_A [REV_B|worktree] [THREADS=2] [ROWS=256] [ROUNDS=5] [EVICT=1]
#
# e.g. `bench/gemm_ab.sh HEAD~1 HEAD 2 256` or `bench/gemm_ab.sh HEAD worktree`. Each side's
# src/kernels/cpu is taken from its revision and compiled with the project's flags for this
# machine (-O3 -march=native -fno-math-errno -fno-trapping-math -fopenmp).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
rev_a=$1
rev_b=${2:-worktree}
threads=${3:-2}
rows=${4:-256}
rounds=${5:-5}
evict=${6:-1}

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cxx=${CXX:-g++}
flags=(-std=c++20 -O3 -march=native -fno-math-errno -fno-trapping-math -fopenmp)

# side NAME REV: that revision's kernels in $work/NAME, compiled into $work/NAME.o.
side() {
  local name=$1 rev=$2
  mkdir -p "$work/$name"
  if [[ $rev == worktree ]]; then
    mkdir -p "$work/$name/src/kernels"
    cp -r "$repo/src/kernels/cpu" "$work/$name/src/kernels/"
  else
    git -C "$repo" archive "$rev" src/kernels/cpu | tar -x -C "$work/$name"
  fi
  "$cxx" "${flags[@]}" "-Dllmcc=llmcc_ab_$name" -I "$work/$name/src" \
    -c "$work/$name/src/kernels/cpu/gemm_packed.cpp" -o "$work/$name.o"
}

side a "$rev_a"
side b "$rev_b"
"$cxx" "${flags[@]}" "$repo/bench/gemm_ab.cpp" "$work/a.o" "$work/b.o" -o "$work/gemm_ab"
echo "A = $rev_a, B = $rev_b"
"$work/gemm_ab" "$threads" "$rows" "$rounds" "$evict"
