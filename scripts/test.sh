#!/usr/bin/env bash
# The test command: setup, configure, build, run the default test suite (everything but the
# `slow` label). Usage: scripts/test.sh [extra ctest arguments, e.g. -L grad]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLLMCC_WERROR=ON
cmake --build build -j"$jobs"
# With the shared data beside the repository (as in CI), a test that cannot find it fails
# instead of skipping (tests/support/test_data.h).
if [ -d "${LLMCC_SHARED_DATA:-../shared/data}" ]; then export LLMCC_TEST_REQUIRE_DATA=1; fi
cd build
ctest --output-on-failure -j"$jobs" -LE slow "$@"
