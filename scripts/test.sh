#!/usr/bin/env bash
# The test command (docs/testing.md): setup; the C++ layout check; configure, build and run the
# default test suite (everything but the `slow` label) with GCC, while the sanitizer build
# compiles at the lowest priority; the PyTorch extension's tests (scripts/test_python.sh: the
# torch venv, the extension built on the GCC build's libraries, pytest) while that build
# finishes; then the unit, kernels, grad, e2e, model and mpi
# tests again under AddressSanitizer and UndefinedBehaviorSanitizer (clang-19), and every parser's
# libFuzzer target for a few seconds (scripts/test_sanitized.sh: one clang build for both).
# Usage: scripts/test.sh [ctest arguments, e.g. -L grad: then only that GCC ctest run]
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
# phase NAME: how long the test command has run so far, after each part (the 18-minute budget,
# docs/testing.md).
phase() { printf 'test.sh: %s done at %dm%02ds\n' "$1" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }

bash scripts/setup.sh
jobs=$(nproc)
# New build directories use Ninja, which compiles a target's sources while the libraries it links
# are still being built; every build here links with lld (the ~100 test programs link each
# llmcc's static libraries). An existing build directory keeps the generator it was made with.
export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Ninja}
export LLMCC_LINK_FLAGS="-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld"
bash scripts/check_format.sh
# The GCC build takes another tuning than this CPU's own, one that prefers another vector width
# (LLMCC_TUNE, CMakeLists.txt): a result that changes with the tuning then fails the bit-exact
# tests (e2e.TrainGolden) on every machine, not only on the other vendor's.
if grep -qw avx512f /proc/cpuinfo; then
  if grep -q GenuineIntel /proc/cpuinfo; then tune=znver3; else tune=icelake-server; fi
else
  tune=znver1  # 128-bit vectors; every AVX2 CPU's own tuning uses 256
fi
echo "test.sh: building with -mtune=$tune on top of -march=native"
if [ $# -eq 0 ]; then
  # The sanitizer build (clang, build-san) starts now, beside the GCC build and suite, at the
  # lowest priority: it takes a core only when they leave one idle (a build's serial tail, a
  # suite's last tests), and the rest after the GCC suite. setsid puts it in a process group of
  # its own (stopped with the script) and, where the kernel groups a session's processes for
  # scheduling (autogroup), in a group of its own: that group's nice value is the one that
  # counts against the GCC build's, so it is set to 19 as well. Its output is printed when the
  # build is waited for.
  mkdir -p build-san
  sanitizer_log=build-san/test_sh_build.log
  setsid --wait nice -n 19 bash -c '{ echo 19 > /proc/self/autogroup; } 2> /dev/null || true
    exec bash scripts/test_sanitized.sh --build-only' > "$sanitizer_log" 2>&1 &
  sanitizer_pid=$!
  trap 'kill -- -"$sanitizer_pid" 2> /dev/null || true' EXIT
fi
# shellcheck disable=SC2086  # LLMCC_LINK_FLAGS is two arguments
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLLMCC_WERROR=ON -DLLMCC_TUNE="$tune" $LLMCC_LINK_FLAGS
cmake --build build -j"$jobs"
phase "GCC build"
# With the shared data beside the repository (as in CI), a test that cannot find it fails
# instead of skipping (tests/support/test_data.h).
if [ -d "${LLMCC_SHARED_DATA:-../shared/data}" ]; then export LLMCC_TEST_REQUIRE_DATA=1; fi
# Tests run two at a time, most with a thread per core: OpenMP threads that finish their share
# sleep instead of spinning on the cores the other test needs. Results do not depend on the wait
# policy.
(cd build && OMP_WAIT_POLICY=passive ctest --output-on-failure -j"$jobs" -LE slow "$@")
phase "GCC suite"
if [ $# -eq 0 ]; then
  # The PyTorch extension's tests run while the sanitizer build finishes: making the venv (pip
  # unpacking wheels), pytest and the transformers models leave a core mostly idle, which the
  # build takes. Their output is printed when both are done; the sanitized tests then run alone.
  python_log=build/test_python.log
  # setsid: its own process group, so that a failed build stops pip and pytest too (--wait: the
  # exit status is the script's even if setsid had to fork).
  LLMCC_BUILD_DIR="$PWD/build" setsid --wait bash scripts/test_python.sh > "$python_log" 2>&1 &
  python_pid=$!
  trap 'kill -- -"$python_pid" -"$sanitizer_pid" 2> /dev/null || true' EXIT
  sanitizer_status=0
  wait "$sanitizer_pid" || sanitizer_status=$?
  cat "$sanitizer_log"
  if [ "$sanitizer_status" -ne 0 ]; then
    echo "test.sh: the sanitizer build failed (exit status $sanitizer_status; output above)" >&2
    exit "$sanitizer_status"
  fi
  phase "sanitizer build"
  python_status=0
  wait "$python_pid" || python_status=$?
  trap - EXIT
  cat "$python_log"
  if [ "$python_status" -ne 0 ]; then
    echo "test.sh: the PyTorch extension's tests failed (exit status $python_status; output above)" >&2
    exit "$python_status"
  fi
  phase "PyTorch extension"
  bash scripts/test_sanitized.sh --tests-only
  phase "sanitized suite and bounded fuzz run"
fi
