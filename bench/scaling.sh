#!/usr/bin/env bash
# Data-parallel scaling of one GPT-2 training step (docs/distributed.md), in one invocation:
#
#   bench/scaling.sh [--model gpt2] [--global-batch 4] [--seq-len 64] [--steps 12] [--rounds 1]
#                    [--netns "10gbit 1gbit"] [--llmcc build/llmcc] [--log-dir DIR]
#
# Runs, each `llmcc train` for --steps steps on Tiny Shakespeare with the same global batch:
#   np1x2   one process, 2 threads (no MPI)
#   np2x1   mpirun -np 2, 1 thread each, default --comm auto (one machine: shared weights and
#           gradients, ZeRO-1)
#   np2x1-mpi  the same with --comm mpi: MPI collectives over shared memory, bucketed and started
#           while the backward runs (ZeRO-1)
#   netns-RATE  (with --netns, as root) one rank in each of two network namespaces joined by veth
#           links shaped to RATE (bench/netns.sh), launched through bench/netns_mpirun.sh: MPI over
#           TCP, --comm mpi
# With --rounds R the list runs R times, alternating, and each figure is the median over rounds.
# Per run: the median step time over the steps after the second (log.jsonl), tokens/s, the
# ratio to np1x2, every rank's mean exposed communication (time the step waited for other ranks
# and collectives) and the communication in flight, and AdamW's state per rank (the header).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
llmcc="$root/build/llmcc"
model=gpt2
global_batch=4
seq_len=64
steps=12
rounds=1
netns_rates=""
log_dir=""

while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --global-batch) global_batch="$2"; shift 2 ;;
    --seq-len) seq_len="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --netns) netns_rates="$2"; shift 2 ;;
    --llmcc) llmcc="$2"; shift 2 ;;
    --log-dir) log_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scaling.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

[ -x "$llmcc" ] || { echo "scaling.sh: no llmcc binary at $llmcc (build first, or give --llmcc)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "scaling.sh: mpirun not found (scripts/setup.sh installs openmpi-bin)" >&2; exit 1; }
if [ $((global_batch % 2)) -ne 0 ]; then
  echo "scaling.sh: --global-batch $global_batch does not split over 2 ranks" >&2; exit 2
fi
if [ -n "$netns_rates" ] && [ "$(id -u)" -ne 0 ]; then
  echo "scaling.sh: --netns needs root (network namespaces and tc)" >&2; exit 1
fi
root_flag=""
[ "$(id -u)" -eq 0 ] && root_flag="--allow-run-as-root"

[ -n "$log_dir" ] || log_dir="$(mktemp -d /tmp/llmcc-scaling.XXXXXX)"
mkdir -p "$log_dir"
data="$log_dir/data"
if [ ! -f "$data/train_000000.bin" ]; then
  "$llmcc" prepare --input tinyshakespeare --out "$data" >"$log_dir/prepare.log" 2>&1 ||
    { cat "$log_dir/prepare.log" >&2; exit 1; }
fi

cpu="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
flags=""
grep -qw avx512f /proc/cpuinfo && flags="AVX-512"
grep -qw avx512_bf16 /proc/cpuinfo && flags="$flags, AVX512_BF16"
echo "scaling: $model, global batch $global_batch x $seq_len tokens, $steps steps per run, $rounds round(s)"
echo "  machine: $cpu (${flags:-AVX2 only}), $(nproc) cores; $(mpirun --version | head -1)"
echo "  logs: $log_dir"

common=(train --model "$model" --train-data "$data/train_000000.bin" --steps "$steps" --seq-len "$seq_len"
        --val-every 0 --sampling sequential)
half=$((global_batch / 2))

run_side() {  # name round
  local name="$1" out="$log_dir/$1.$2"
  rm -rf "$out"
  case "$name" in
    np1x2) OMP_NUM_THREADS=2 "$llmcc" "${common[@]}" --threads 2 --batch-size "$global_batch" --out-dir "$out" ;;
    np2x1) OMP_NUM_THREADS=1 mpirun $root_flag --bind-to none -np 2 \
             "$llmcc" "${common[@]}" --threads 1 --batch-size "$half" --out-dir "$out" ;;
    np2x1-mpi) OMP_NUM_THREADS=1 mpirun $root_flag --bind-to none -np 2 \
             "$llmcc" "${common[@]}" --threads 1 --batch-size "$half" --comm mpi --out-dir "$out" ;;
    netns-*)
      "$here/netns.sh" up 2 --rate "${name#netns-}" >/dev/null
      # Each namespace looks like a machine of its own to mpirun, which would bind both ranks to
      # core 0: no binding.
      MPIRUN_ARGS="--bind-to none" "$here/netns_mpirun.sh" 2 env OMP_NUM_THREADS=1 \
        "$llmcc" "${common[@]}" --threads 1 --batch-size "$half" --comm mpi --out-dir "$out" || true
      "$here/netns.sh" down >/dev/null ;;
  esac >"$out.txt" 2>&1 || true
}

sides=(np1x2 np2x1 np2x1-mpi)
for rate in $netns_rates; do sides+=("netns-$rate"); done
trap '[ -n "$netns_rates" ] && "$here/netns.sh" down >/dev/null 2>&1 || true' EXIT

for (( r = 1; r <= rounds; r++ )); do
  for side in "${sides[@]}"; do
    echo "  round $r: $side" >&2
    run_side "$side" "$r"
  done
done

python3 - "$log_dir" "$rounds" "$global_batch" "$seq_len" "${sides[@]}" <<'EOF'
import json, re, statistics, sys
log_dir, rounds, gb, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sides = sys.argv[5:]
rows = {}
for side in sides:
    ms, exposed, flight, adamw, note = [], [], [], "", ""
    for r in range(1, rounds + 1):
        base = f"{log_dir}/{side}.{r}"
        try:
            steps = [json.loads(l) for l in open(base + "/log.jsonl") if '"loss"' in l]
        except OSError:
            note = "failed: see " + base + ".txt"
            continue
        steps = steps[2:] or steps
        ms.append(statistics.median(s["ms"] for s in steps))
        if "comm_ms" in steps[0]:
            flight.append(statistics.median(s["comm_ms"] for s in steps))
        text = open(base + ".txt", errors="replace").read()
        m = re.search(r"exposed communication of step: (.*)", text)
        if m:
            exposed.append([float(x) for x in re.findall(r"rank \d+ ([\d.]+) of", m.group(1))])
        m = re.search(r"AdamW ([\d.]+ [GM]iB)", text)
        if m:
            adamw = m.group(1)
    if not ms:
        rows[side] = None
        print(f"  {side}: {note}")
        continue
    e = [statistics.median(col) for col in zip(*exposed)] if exposed else []
    rows[side] = (statistics.median(ms), e, statistics.median(flight) if flight else None, adamw)

base_ms = rows["np1x2"][0] if rows.get("np1x2") else None
print()
print("| run | ms/step | tokens/s | vs np1x2 | exposed comm per rank (ms, % of step) | comm in flight (ms) | AdamW state per rank |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for side in sides:
    row = rows.get(side)
    if not row:
        continue
    ms, e, flight, adamw = row
    tps = gb * T / (ms / 1e3)
    ratio = f"{base_ms / ms:.3f}x" if base_ms else "-"
    exp = ", ".join(f"{x:.1f} ({100 * x / ms:.1f}%)" for x in e) if e else "-"
    fl = f"{flight:.0f}" if flight is not None else "-"
    print(f"| {side} | {ms:.1f} | {tps:.1f} | {ratio} | {exp} | {fl} | {adamw} |")
EOF
