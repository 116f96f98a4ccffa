#!/usr/bin/env bash
# The test command (docs/testing.md): setup; the C++ layout check; configure, build and run the
# default test suite (everything but the `slow` label) with GCC; the PyTorch extension's tests
# (scripts/test_python.sh: the torch venv, the extension built on the GCC build's libraries,
# pytest); then the unit, kernels, grad and e2e tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer (clang-19), and every parser's libFuzzer target for a few seconds.
# Usage: scripts/test.sh [ctest arguments, e.g. -L grad: then only that GCC ctest run]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
jobs=$(nproc)
bash scripts/check_format.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLLMCC_WERROR=ON
cmake --build build -j"$jobs"
# With the shared data beside the repository (as in CI), a test that cannot find it fails
# instead of skipping (tests/support/test_data.h).
if [ -d "${LLMCC_SHARED_DATA:-../shared/data}" ]; then export LLMCC_TEST_REQUIRE_DATA=1; fi
(cd build && ctest --output-on-failure -j"$jobs" -LE slow "$@")
if [ $# -eq 0 ]; then
  LLMCC_BUILD_DIR="$PWD/build" bash scripts/test_python.sh
  bash scripts/test_sanitized.sh
  bash scripts/fuzz.sh --bounded
fi
