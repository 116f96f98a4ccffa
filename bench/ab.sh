#!/usr/bin/env bash
# In-process A/B of one kernel file between two git revisions (or a revision and the working
# tree): both builds are linked into one driver that alternates them call by call (on a shared
# machine the load drifts more within a minute than most kernel changes are worth).
#
#   bench/ab.sh KERNEL REV_A [REV_B|worktree|onednn] [DRIVER ARGS...]
#
# KERNEL is gemm (src/kernels/cpu/gemm_packed.cpp, driver bench/gemm_ab.cpp: THREADS ROWS ROUNDS
# EVICT; a side named `onednn` is oneDNN's dnnl_sgemm instead of a revision) or attention
# (src/kernels/cpu/attention.cpp, driver bench/attention_ab.cpp: THREADS T ROUNDS). Each side's
# src/kernels/cpu is taken from its revision and compiled with the project's flags for this
# machine (-O3 -march=native -mprefer-vector-width=512 -fno-math-errno -fno-trapping-math
# -fopenmp), plus AB_FLAGS_A / AB_FLAGS_B for that side alone: e.g. `AB_FLAGS_A=-mno-avx512f
# bench/ab.sh gemm HEAD HEAD` sets the AVX2 micro-kernel against the AVX-512 one on the same
# machine.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
kernel=$1
rev_a=$2
rev_b=${3:-worktree}
shift $(($# < 3 ? $# : 3))
case $kernel in
  gemm) source_file=gemm_packed.cpp ;;
  attention) source_file=attention.cpp ;;
  *)
    echo "bench/ab.sh: unknown kernel '$kernel' (expected gemm or attention)" >&2
    exit 2
    ;;
esac

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cxx=${CXX:-g++}
flags=(-std=c++20 -O3 -march=native -mprefer-vector-width=512 -fno-math-errno -fno-trapping-math -fopenmp)

# side NAME REV EXTRA_FLAGS: that revision's kernels in $work/NAME, compiled into $work/NAME.o.
side() {
  local name=$1 rev=$2
  local -a extra
  read -r -a extra <<< "$3"
  mkdir -p "$work/$name"
  if [[ $rev == onednn ]]; then
    # oneDNN's dnnl_sgemm in place of a revision's gemm_packed (the GEMM only): the same calls,
    # row-major, on omp_get_max_threads() threads.
    [[ $source_file == gemm_packed.cpp ]] || {
      echo "bench/ab.sh: the onednn side is for the gemm kernel only" >&2
      exit 2
    }
    cat > "$work/$name/onednn_side.cpp" << 'EOF_SIDE'
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <cstdlib>

namespace llmcc::cpu {
void gemm_packed(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
  if (dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) !=
      dnnl_success) {
    std::fprintf(stderr, "gemm_ab: dnnl_sgemm failed\n");
    std::abort();
  }
}
}  // namespace llmcc::cpu
EOF_SIDE
    "$cxx" "${flags[@]}" "${extra[@]}" "-Dllmcc=llmcc_ab_$name" -c "$work/$name/onednn_side.cpp" -o "$work/$name.o"
    objects+=("$work/$name.o")
    libs=(-ldnnl)
    return
  fi
  if [[ $rev == worktree ]]; then
    mkdir -p "$work/$name/src/kernels"
    cp -r "$repo/src/kernels/cpu" "$work/$name/src/kernels/"
    cp "$repo/src/kernels/attention_layout.h" "$work/$name/src/kernels/"
  else
    git -C "$repo" archive "$rev" src/kernels/cpu src/kernels/attention_layout.h | tar -x -C "$work/$name"
  fi
  local -a sources=("$work/$name/src/kernels/cpu/$source_file")
  # The GEMM takes its blocking from gemm_blocking.cpp (which reports errors through llmcc's
  # error.cpp) and hands single rows to gemv.cpp and skinny products to gemm_skinny.cpp, in the
  # revisions that have them.
  if [[ $source_file == gemm_packed.cpp ]]; then
    local f
    for f in gemm_blocking gemm_skinny gemv; do
      [[ ! -f "$work/$name/src/kernels/cpu/$f.cpp" ]] || sources+=("$work/$name/src/kernels/cpu/$f.cpp")
    done
    [[ ! -f "$work/$name/src/kernels/cpu/gemm_blocking.cpp" ]] || sources+=("$repo/src/tensor/error.cpp")
    # The tuner's buffers come from tensor/large_alloc (the step's pages), in revisions that use it.
    if grep -q 'tensor/large_alloc.h' "$work/$name/src/kernels/cpu/gemm_blocking.cpp" 2> /dev/null; then
      sources+=("$repo/src/tensor/large_alloc.cpp")
    fi
  fi
  local i=0
  for s in "${sources[@]}"; do
    "$cxx" "${flags[@]}" "${extra[@]}" "-Dllmcc=llmcc_ab_$name" -I "$work/$name/src" -I "$repo/src" -I "$repo/include" \
      -c "$s" -o "$work/$name.$i.o"
    objects+=("$work/$name.$i.o")
    i=$((i + 1))
  done
}

objects=()
libs=()
side a "$rev_a" "${AB_FLAGS_A:-}"
side b "$rev_b" "${AB_FLAGS_B:-}"
"$cxx" "${flags[@]}" -I "$repo/src" -I "$repo/include" "$repo/bench/${kernel}_ab.cpp" "${objects[@]}" "${libs[@]}" -o "$work/ab"
echo "A = $rev_a${AB_FLAGS_A:+ ($AB_FLAGS_A)}, B = $rev_b${AB_FLAGS_B:+ ($AB_FLAGS_B)}"
"$work/ab" "$@"
