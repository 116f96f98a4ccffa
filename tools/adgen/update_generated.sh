#!/bin/sh
# Regenerates generated/<name>.grad.{h,cpp} for the given model headers with adgen, using the
# same flags as the freshness test (tests/adgen/test_adgen_golden.cpp, AdgenGenerated), so that
# builds without Clang's development packages (LLMCC_BUILD_ADGEN=OFF) get current code.
#   tools/adgen/update_generated.sh build/tools/adgen/adgen src/models/gpt2/gpt2.h [...]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
adgen=$1
shift
mkdir -p "$root/generated"
for src in "$@"; do
  name=$(basename "$src" .h)
  "$adgen" "$root/$src" --out-header "$root/generated/$name.grad.h" --out-source "$root/generated/$name.grad.cpp" \
    --root "$root" -- -I"$root/include" -I"$root/src" -I"$root/tests/adgen" -I"$root/tests/train"
  echo "generated/$name.grad.h, generated/$name.grad.cpp <- $src"
done
