#!/usr/bin/env bash
# llmcc against PyTorch on the same GPT-2 or Llama training step, alternating in one invocation.
#
#   bench/compare.sh [--model gpt2|stories110m|...] [--dtype fp32|bf16] [--batch-size 4] [--seq-len 64] [--threads 2] [--rounds 3]
#                    [--steps 10] [--warmup 2] [--llmcc build/llmcc] [--python PYTHON]
#                    [--modes "eager compile"] [--keep-openblas-env] [--env "NAME=VALUE ..."]
#                    [--log-dir DIR]
#
# PYTHON is the interpreter whose torch is measured: by default build/venv-torch/bin/python3
# (PyTorch 2.x from PyPI, made by bench/setup_pytorch.sh; $LLMCC_TORCH_VENV names another venv)
# when it exists, else /usr/bin/python3 (Debian's python3-torch 1.13). The header says which torch
# that is and where it does its GEMMs (torch.__config__.show() is saved in the log directory).
#
# --dtype bf16 runs llmcc with bf16 matrix products (`llmcc bench --dtype bf16`) and PyTorch
# under torch.autocast("cpu", dtype=torch.bfloat16); MFU is then against the bf16 peak llmcc
# bench measures (vdpbf16ps on CPUs with AVX512_BF16). Each round also runs llmcc in fp32 (side
# llmcc-fp32, its MFU against the fp32 peak), so bf16's gain over fp32 is measured in the same
# run; the last lines give both ratios.
#
# Each round runs `llmcc bench` then bench/pytorch_bench.py once per PyTorch mode (eager and
# torch.compile are separate peers), so machine load drifts over all sides alike. Every run prints its median ms/step; the table shows, per
# side, the median over rounds of those medians, tokens/s from it, the best single step, the
# largest peak RSS, GFLOP/s and MFU (llmcc's FLOP count per step over the median step, against
# the largest fp32 FMA peak llmcc bench measured over the rounds), and the ratio of tokens/s (llmcc / PyTorch) from the
# medians and from the best steps (on a loaded machine the best step is the least disturbed one);
# the last line is llmcc against the fastest PyTorch mode (by median). Every llmcc round
# also runs its profiled steps; the profile shown is from the round where they ran fastest. A
# PyTorch mode that is not available (torch.compile before 2.0) is reported and skipped.
# Runs may add environment variables to both sides with --env "NAME=VALUE ..." (for example
# OMP_WAIT_POLICY=passive).
#
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset for PyTorch by default: this environment pins
# OpenBLAS to its AVX2 Haswell kernels, and PyTorch (Debian's python3-torch) does its GEMMs in
# OpenBLAS, so the unset environment is PyTorch's fastest configuration here (docs/perf.md).
# --keep-openblas-env runs it with them. Both sides get OMP_NUM_THREADS and MKL_NUM_THREADS
# = --threads (PyTorch also torch.set_num_threads, llmcc its --threads).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
model=gpt2 dtype=fp32 batch=4 seq_len=64 threads=2 rounds=3 steps=10 warmup=2
llmcc="${LLMCC:-$root/build/llmcc}"
python="${PYTHON:-}"
modes="eager compile"
keep_env=0
extra_env=""
log_dir=""

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
need() { [[ $# -ge 2 && -n "$2" ]] || { echo "compare.sh: $1 expects a value" >&2; exit 1; }; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) need "$@"; model="$2"; shift 2 ;;
    --dtype) need "$@"; dtype="$2"; shift 2 ;;
    --batch-size) need "$@"; batch="$2"; shift 2 ;;
    --seq-len) need "$@"; seq_len="$2"; shift 2 ;;
    --threads) need "$@"; threads="$2"; shift 2 ;;
    --rounds) need "$@"; rounds="$2"; shift 2 ;;
    --steps) need "$@"; steps="$2"; shift 2 ;;
    --warmup) need "$@"; warmup="$2"; shift 2 ;;
    --llmcc) need "$@"; llmcc="$2"; shift 2 ;;
    --python) need "$@"; python="$2"; shift 2 ;;
    --modes) need "$@"; modes="$2"; shift 2 ;;
    --keep-openblas-env) keep_env=1; shift ;;
    --env) need "$@"; extra_env="$2"; shift 2 ;;
    --log-dir) need "$@"; log_dir="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
[[ "$dtype" == fp32 || "$dtype" == bf16 ]] || { echo "compare.sh: --dtype must be fp32 or bf16, got '$dtype'" >&2; exit 1; }
for n in "$batch" "$seq_len" "$threads" "$rounds" "$steps" "$warmup"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "compare.sh: expected a whole number, got '$n'" >&2; exit 1; }
done
[[ -x "$llmcc" ]] || { echo "compare.sh: no llmcc binary at $llmcc (build it, or pass --llmcc PATH)" >&2; exit 1; }
if [[ -z "$python" ]]; then
  venv="${LLMCC_TORCH_VENV:-$root/build/venv-torch}"
  if [[ -x "$venv/bin/python3" ]]; then python="$venv/bin/python3"; else python=/usr/bin/python3; fi
fi
"$python" -c "import torch" 2>/dev/null || { echo "compare.sh: $python cannot import torch (run bench/setup_pytorch.sh, or pass --python)" >&2; exit 1; }
if [[ -z "$log_dir" ]]; then log_dir="$(mktemp -d /tmp/llmcc-compare.XXXXXX)"; fi
mkdir -p "$log_dir"

read -r -a extra <<< "$extra_env"
for kv in "${extra[@]}"; do
  [[ "$kv" == *=* ]] || { echo "compare.sh: --env expects NAME=VALUE words, got '$kv'" >&2; exit 1; }
done
py_env=(env)
[[ $keep_env -eq 1 ]] || py_env+=(-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
py_env+=(OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads" "${extra[@]}")
llmcc_env=(env OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads" "${extra[@]}")
common=(--model "$model" --dtype "$dtype" --batch-size "$batch" --seq-len "$seq_len" --threads "$threads" --warmup "$warmup" --steps "$steps")

echo "compare.sh: $model $dtype B=$batch T=$seq_len, $threads threads, $rounds rounds of $warmup warm-up + $steps timed steps"
echo "  llmcc:   $llmcc (built $(date -u -r "$llmcc" '+%F %H:%M UTC'); repository at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "  pytorch: $python, modes: $modes" \
     "$([[ $keep_env -eq 1 ]] && echo '(OpenBLAS environment kept)' || echo '(OPENBLAS_CORETYPE unset)')"
echo "           $("${py_env[@]}" "$python" "$here/pytorch_bench.py" --describe)"
"$python" -c 'import torch; print(torch.__config__.show())' > "$log_dir/torch-config.txt"
[[ -z "$extra_env" ]] || echo "  environment of both sides: $extra_env"
echo "  machine: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); logs in $log_dir"

# result lines: "<side> key=value ..." gathered over rounds
results="$log_dir/results.txt"
: > "$results"
unavailable=""
for ((r = 1; r <= rounds; r++)); do
  log="$log_dir/llmcc.$r.log"
  "${llmcc_env[@]}" "$llmcc" bench "${common[@]}" --profile > "$log" 2>&1 ||
    { echo "compare.sh: llmcc bench failed (round $r):" >&2; cat "$log" >&2; exit 1; }
  line="$(grep '^result:' "$log" | tail -1)"
  echo "llmcc ${line#result: }" >> "$results"
  echo "round $r: llmcc $(sed 's/.*median_ms=\([^ ]*\).*/\1/' <<< "$line") ms/step (load $(cut -d' ' -f1 /proc/loadavg))"
  if [[ "$dtype" == bf16 ]]; then
    log="$log_dir/llmcc-fp32.$r.log"
    fp32_args=("${common[@]}")
    fp32_args[3]=fp32  # --dtype's value in common
    "${llmcc_env[@]}" "$llmcc" bench "${fp32_args[@]}" --no-profile > "$log" 2>&1 ||
      { echo "compare.sh: llmcc bench --dtype fp32 failed (round $r):" >&2; cat "$log" >&2; exit 1; }
    line="$(grep '^result:' "$log" | tail -1)"
    echo "llmcc-fp32 ${line#result: }" >> "$results"
    echo "round $r: llmcc-fp32 $(sed 's/.*median_ms=\([^ ]*\).*/\1/' <<< "$line") ms/step (load $(cut -d' ' -f1 /proc/loadavg))"
  fi
  for mode in $modes; do
    [[ " $unavailable " == *" $mode "* ]] && continue
    log="$log_dir/pytorch-$mode.$r.log"
    set +e
    "${py_env[@]}" "$python" "$here/pytorch_bench.py" "${common[@]}" --mode "$mode" > "$log" 2>&1
    rc=$?
    set -e
    if [[ $rc -eq 2 ]]; then
      echo "round $r: pytorch-$mode not available: $(tail -1 "$log")"
      unavailable+=" $mode"
      continue
    elif [[ $rc -ne 0 ]]; then
      echo "compare.sh: pytorch_bench.py --mode $mode failed (round $r):" >&2; cat "$log" >&2; exit 1
    fi
    line="$(grep '^result:' "$log" | tail -1)"
    echo "pytorch-$mode ${line#result: }" >> "$results"
    echo "round $r: pytorch-$mode $(sed 's/.*median_ms=\([^ ]*\).*/\1/' <<< "$line") ms/step (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done

# The profile of the round whose profiled steps were fastest (the least disturbed by other load).
best_log="$(for f in "$log_dir"/llmcc.*.log; do
  echo "$(sed -n 's/^per-op profile.*mean step \([0-9.]*\) ms.*/\1/p' "$f") $f"
done | sort -n | head -1 | cut -d' ' -f2)"
echo
# The peak the table's MFU uses (the dtype's): the largest any round measured.
peak_line='^fp32 FMA peak'
[[ "$dtype" == bf16 ]] && peak_line='^bf16 dot-product peak'
awk -F': ' -v pat="$peak_line" '$0 ~ pat { split($2, w, " "); if (w[1] + 0 > best) { best = w[1] + 0; line = $0 } }
            END { print line " (the largest of the rounds)" }' "$log_dir"/llmcc.*.log
echo
# Table: per side, median over rounds of the per-run median, best step, largest peak RSS.
awk -v tokens="$((batch * seq_len))" '
  function get(key,   i, kv) {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) return kv[2] }
    return ""
  }
  function median(arr, n,   i, j, t, a) {
    for (i = 1; i <= n; i++) a[i] = arr[i]
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  {
    side = $1
    if (!(side in count)) order[++sides] = side
    n = ++count[side]
    ms[side, n] = get("median_ms")
    mn = get("min_ms"); if (!(side in best) || mn < best[side]) best[side] = mn
    rss = get("peak_rss_mib"); if (rss > maxrss[side]) maxrss[side] = rss
    all[side] = all[side] (n > 1 ? ", " : "") sprintf("%.0f", ms[side, n])
    # The peak: the largest any round measured (a round whose bursts were all disturbed reads
    # low, and MFU against it would read high); per llmcc side, whose dtype it is.
    if (side ~ /^llmcc/) { flop += get("gflops") * get("median_ms"); nflop++; p = get("peak_gflops") + 0; if (p > peak[side]) peak[side] = p }
  }
  END {
    for (s = 1; s <= sides; s++) {
      side = order[s]
      delete arr
      for (i = 1; i <= count[side]; i++) arr[i] = ms[side, i]
      med[side] = median(arr, count[side])
    }
    gflop = nflop ? flop / nflop / 1000 : 0  # GFLOP per step, as llmcc counts it (the same in every run)
    printf "| side | median ms/step | tokens/s | GFLOP/s | MFU | best step ms | peak RSS MiB | per-round medians (ms) |"
    printf " llmcc/side tokens/s (median) | (best step) |\n"
    printf "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    for (s = 1; s <= sides; s++) {
      side = order[s]
      ratio = ("llmcc" in med) ? sprintf("%.2fx", med[side] / med["llmcc"]) : "-"
      bratio = ("llmcc" in best) ? sprintf("%.2fx", best[side] / best["llmcc"]) : "-"
      rate = gflop ? sprintf("%.0f", gflop / (med[side] / 1000)) : "-"
      pk = (side in peak) ? peak[side] : peak["llmcc"]
      mfu = gflop && pk ? sprintf("%.1f%%", 100 * gflop / (med[side] / 1000) / pk) : "-"
      printf "| %s | %.1f | %.1f | %s | %s | %.1f | %.0f | %s | %s | %s |\n", side, med[side], tokens / (med[side] / 1000),
             rate, mfu, best[side], maxrss[side], all[side], (side == "llmcc" ? "-" : ratio), (side == "llmcc" ? "-" : bratio)
      if (side !~ /^llmcc/ && (fastest == "" || med[side] < med[fastest])) fastest = side
    }
    if (fastest != "" && ("llmcc" in med))
      printf "\nllmcc against the fastest PyTorch mode (%s, median %.1f ms/step): %.2fx its tokens/s (best steps: %.2fx)\n",
             fastest, med[fastest], med[fastest] / med["llmcc"], best[fastest] / best["llmcc"]
    if (("llmcc-fp32" in med) && ("llmcc" in med))
      printf "llmcc bf16 against llmcc fp32 (median %.1f ms/step): %.2fx its tokens/s (best steps: %.2fx)\n",
             med["llmcc-fp32"], med["llmcc-fp32"] / med["llmcc"], best["llmcc-fp32"] / best["llmcc"]
  }' "$results"
echo
echo "llmcc per-op profile ($(basename "$best_log" .log), the round with the fastest profiled steps):"
sed -n '/^per-op profile/,/^(outside ops)/p' "$best_log"
