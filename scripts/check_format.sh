#!/usr/bin/env bash
# Checks that every C++ file git tracks, or would add (untracked and not ignored), follows
# .clang-format (clang-format-19), except those .clang-format-ignore lists; prints the files that
# do not and how to fix them.
# Usage: scripts/check_format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format-19 >/dev/null || { echo "check_format: clang-format-19 not found (bash scripts/setup.sh installs it)" >&2; exit 1; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.h' '*.cpp' | grep -v -e '^generated/' -e '^tests/adgen/')
if [ "${1:-}" = "--fix" ]; then
  clang-format-19 -i "${files[@]}"
  exit 0
fi
# Batches of files, one clang-format process each, on every core: one process per file spent
# most of the check starting processes. Only when a batch fails are its files checked one by one,
# to name them.
if printf '%s\0' "${files[@]}" | xargs -0 -r -n 64 -P "$(nproc)" clang-format-19 --dry-run --Werror >/dev/null 2>&1; then
  echo "check_format: ${#files[@]} files follow .clang-format"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! clang-format-19 --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted: %s\n' "${bad[@]}" >&2
  echo "check_format: ${#bad[@]} file(s) differ from .clang-format; run: bash scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files follow .clang-format"
