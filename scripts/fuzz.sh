#!/usr/bin/env bash
# Long fuzz runs by hand (docs/fuzzing.md): configures and builds the fuzz build directory
# (clang-19, ASan + UBSan, LLMCC_FUZZ=ON), writes the seed corpora, then runs every target (or
# the ones named) for the given seconds each, one after another, and prints the executions per
# target. Inputs that found new coverage accumulate in <build>/fuzz/work/<target> and seed the
# next run; a crash leaves its input in <build>/fuzz/artifacts/<target>/ and fails the script.
#
#   bash scripts/fuzz.sh [seconds-per-target] [target...]     (default 60 s, every target)
#   bash scripts/fuzz.sh --bounded                            (build, then the bounded ctest run)
#   LLMCC_FUZZ_BUILD=dir  build directory (default build-fuzz)
#   JOBS=n                build jobs (default nproc)
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
shift || true
build=${LLMCC_FUZZ_BUILD:-build-fuzz}
jobs=${JOBS:-$(nproc)}

cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_C_COMPILER=clang-19 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g" \
  -DLLMCC_FUZZ=ON -DLLMCC_BUILD_TESTS=OFF -DLLMCC_BUILD_BENCH=OFF -DLLMCC_BUILD_ADGEN=OFF \
  -DLLMCC_INSTALL=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target llmcc_fuzz
# --bounded: the short run (ctest label fuzz, LLMCC_FUZZ_CTEST_SECONDS per target), as the test
# command runs it in the sanitizer build.
if [ "$secs" = "--bounded" ]; then
  ctest --test-dir "$build" -L fuzz --output-on-failure -j"$jobs"
  exit
fi

fuzz="$build/fuzz"
"$fuzz/llmcc_fuzz_make_seeds" "$fuzz/corpus"
mkdir -p "$fuzz/logs"

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cut -d' ' -f1 "$fuzz/targets.txt")
fi

declare -A execs rate status
failed=0
for t in "${targets[@]}"; do
  max_len=$(awk -v t="$t" '$1 == t { print $2 }' "$fuzz/targets.txt")
  if [ -z "$max_len" ]; then
    echo "unknown target '$t' (see $fuzz/targets.txt)" >&2
    exit 2
  fi
  mkdir -p "$fuzz/work/$t" "$fuzz/artifacts/$t"
  dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  log="$fuzz/logs/$t.log"
  echo "== fuzz_$t: ${secs}s, inputs up to $max_len bytes (log: $log)"
  rc=0
  "$fuzz/fuzz_$t" -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$fuzz/artifacts/$t/" "${dict[@]}" \
    "$fuzz/work/$t" "$fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  s=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  execs[$t]=${n:-?}
  rate[$t]=${s:-?}
  if [ "$rc" -eq 0 ]; then
    status[$t]=ok
  else
    status[$t]="FAILED (exit $rc; see $log and $fuzz/artifacts/$t/)"
    failed=1
    grep -m1 -E "ERROR: (libFuzzer|AddressSanitizer|UndefinedBehaviorSanitizer)|runtime error" "$log" || true
  fi
done

echo
printf '%-18s %14s %10s  %s\n' target executions exec/s status
for t in "${targets[@]}"; do
  printf '%-18s %14s %10s  %s\n' "$t" "${execs[$t]}" "${rate[$t]}" "${status[$t]}"
done
exit $failed
