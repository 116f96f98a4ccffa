#!/usr/bin/env bash
# The sanitizer run: builds llmcc with clang-19 and -fsanitize=address,undefined in build-san
# and runs the unit, kernels, grad, e2e, model and mpi tests there, then the bounded run of every
# parser's libFuzzer target (fuzz/), which this build also holds: one clang build of the
# libraries serves both. Any sanitizer report fails its test.
# Needs the packages of scripts/setup.sh (clang-19, libomp-19-dev, libclang-rt-19-dev: the
# sanitizer runtimes), which scripts/test.sh installs first.
# Usage: scripts/test_sanitized.sh [--build-only | --tests-only] [extra ctest arguments, e.g. -R Gemm]
#   --build-only   configure and build build-san, run nothing (scripts/test.sh builds it while the
#                  PyTorch extension's tests run, then runs the tests with --tests-only)
#   --tests-only   run the tests in an existing build-san
set -euo pipefail
cd "$(dirname "$0")/.."

build=1 tests=1
case "${1:-}" in
  --build-only) tests=0; shift ;;
  --tests-only) build=0; shift ;;
esac

jobs=$(nproc)
# -O1 and line tables (all the stack traces need) keep the build short. adgen is not built, so the models (and the
# classifier of tests/train) use the committed generated/ code, and the tests that need adgen
# itself (label adgen) are not configured. No benchmarks, no install rules. LLMCC_FUZZ adds the
# fuzz targets and libFuzzer's coverage instrumentation of the libraries but their kernels
# (fuzz/coverage_ignorelist.txt), so the tests' arithmetic runs at the sanitizers' speed.
# LLMCC_LINK_FLAGS: scripts/test.sh's linker choice (lld), when it calls this.
# shellcheck disable=SC2086
[ "$build" -eq 0 ] || cmake -S . -B build-san -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DLLMCC_SANITIZE=ON -DLLMCC_WERROR=ON \
  -DLLMCC_BUILD_ADGEN=OFF -DLLMCC_BUILD_BENCH=OFF -DLLMCC_INSTALL=OFF -DLLMCC_FUZZ=ON ${LLMCC_LINK_FLAGS:-}
[ "$build" -eq 0 ] || cmake --build build-san -j"$jobs"
[ "$tests" -eq 1 ] || exit 0
[ -f build-san/CTestTestfile.cmake ] || { echo "test_sanitized.sh: build-san is not built (run without --tests-only first)" >&2; exit 1; }

# A report stops the process with a stack trace; a user's own settings come last and win.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:print_stacktrace=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Tests run two at a time, each with OpenMP threads: idle threads sleep instead of spinning
# on cores the other test needs. Results do not depend on the wait policy.
export OMP_WAIT_POLICY=passive
cd build-san
# unit.NoAllocSteadyState.* skips here (it counts allocations by replacing malloc, which
# AddressSanitizer owns) and says so in its output. The 600 training steps of
# e2e.TrainBf16.Gpt2TinyThreeHundredSteps* (10 s in the release build) are left to that build:
# the bf16 GEMM code they run is covered here by kernels.GemmBf16Kernel.*. So are the two
# 100-step runs of e2e.TrainE2e (a 50257-token head: 105 s each here, alone on the machine): the
# same command-line training of GPT-2 and Llama runs here in e2e.TrainResume (with stops and
# resumes), TrainSpE2e and TrainDivergence, and GPT-2 BPE preparation in unit.CliPrepare.
ctest --output-on-failure -j"$jobs" -L 'unit|kernels|grad|e2e|model' -E 'TrainBf16\.Gpt2TinyThreeHundredSteps|TrainE2e\.' \
  --timeout 1200 "$@"
# The data-parallel tests, whose ranks run under mpirun, with leak checking off in the ranks:
# Open MPI keeps what it allocates at start-up (libmpi, hwloc, its plugins) until exit, and
# LeakSanitizer would report it in every rank. Memory errors and undefined behaviour still stop
# a rank. Only when no test filter was given.
if [ $# -eq 0 ]; then
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" ctest --output-on-failure -L mpi --timeout 1200
  # The bounded fuzz run (docs/fuzzing.md): every target for LLMCC_FUZZ_CTEST_SECONDS from its
  # seeds; any crash, leak or sanitizer report fails.
  ctest --output-on-failure -j"$jobs" -L fuzz
fi
