#!/usr/bin/env bash
# A/B of llmcc's packed GEMM between two git revisions (or a revision and the working tree),
# alternating call by call in one process: see bench/gemm_ab.cpp for why.
#
#   bench/gemm_ab.sh REV_A [REV_B|worktree|onednn] [THREADS=2] [ROWS=256] [ROUNDS=5] [EVICT=1]
#
# e.g. `bench/gemm_ab.sh HEAD~1 HEAD 2 256`, `bench/gemm_ab.sh HEAD worktree`, or
# `bench/gemm_ab.sh HEAD onednn` (oneDNN's dnnl_sgemm as side B).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
exec "$(dirname "$0")/ab.sh" gemm "$1" "${2:-worktree}" "${3:-2}" "${4:-256}" "${5:-5}" "${6:-1}"
