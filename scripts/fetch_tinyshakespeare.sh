#!/usr/bin/env bash
# Puts Tiny Shakespeare (Karpathy's char-rnn corpus, 1,115,394 bytes) at OUT
# (default: data/tinyshakespeare/input.txt in the repo).
#   1. OUT already holds it: nothing to do.
#   2. Online: download it from its public URL (curl, short timeouts).
#   3. Offline: copy it from the shared data directory beside the repo
#      (../shared/data/tinyshakespeare/input.txt, or $LLMCC_SHARED_DATA/tinyshakespeare/input.txt).
# Being offline is not an error; only having neither source is.
# Usage: scripts/fetch_tinyshakespeare.sh [OUT]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo/data/tinyshakespeare/input.txt}"
url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
expected_bytes=1115394
shared="${LLMCC_SHARED_DATA:-$repo/../shared/data}/tinyshakespeare/input.txt"

size_of() { wc -c <"$1" | tr -d ' '; }

if [ -f "$out" ] && [ "$(size_of "$out")" = "$expected_bytes" ]; then
  echo "tinyshakespeare: $out is present"
  exit 0
fi
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT

if command -v curl >/dev/null 2>&1 &&
   curl -fsSL --connect-timeout 5 --max-time 30 -o "$tmp" "$url" 2>/dev/null &&
   [ "$(size_of "$tmp")" = "$expected_bytes" ]; then
  mv "$tmp" "$out"
  echo "tinyshakespeare: downloaded $url -> $out"
  exit 0
fi

if [ -f "$shared" ]; then
  cp "$shared" "$tmp"
  mv "$tmp" "$out"
  echo "tinyshakespeare: offline or download failed; copied $shared -> $out"
  exit 0
fi

echo "tinyshakespeare: could not download $url and found no local copy at $shared;" >&2
echo "  connect to the internet, or put input.txt there (or set LLMCC_SHARED_DATA)" >&2
exit 1
