#!/usr/bin/env bash
# Fetches the data llmcc reads but does not ship, the same way llmcc itself does when it needs
# them (include/llmcc/train/data_files.h):
#   gpt2             GPT-2's tokenizer: gpt2/encoder.json and gpt2/vocab.bpe, from OpenAI
#   tinyshakespeare  tinyshakespeare/input.txt (1,115,394 bytes), from Karpathy's char-rnn
# A set already present is left alone: in $LLMCC_SHARED_DATA when set, else in ../shared/data
# beside the repository, or in the download cache ($LLMCC_DATA_CACHE, else
# $XDG_CACHE_HOME/llmcc, else ~/.cache/llmcc). Otherwise it is downloaded with curl into the
# cache (from $LLMCC_DATA_URL/<file> when set: a mirror, file:// works), checked, and moved into
# place. LLMCC_OFFLINE=1 turns downloading off.
#
# Usage: scripts/fetch_data.sh [--print-dir] [gpt2] [tinyshakespeare]   (default: both)
#   --print-dir  print each set's directory on stdout (messages go to stderr)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

print_dir=0
sets=()
for arg in "$@"; do
  case "$arg" in
    --print-dir) print_dir=1 ;;
    gpt2|tinyshakespeare) sets+=("$arg") ;;
    *) echo "fetch_data.sh: unknown argument '$arg' (expected gpt2, tinyshakespeare or --print-dir)" >&2; exit 2 ;;
  esac
done
[ ${#sets[@]} -gt 0 ] || sets=(gpt2 tinyshakespeare)

if [ -n "${LLMCC_DATA_CACHE:-}" ]; then cache="$LLMCC_DATA_CACHE"
elif [ -n "${XDG_CACHE_HOME:-}" ]; then cache="$XDG_CACHE_HOME/llmcc"
else cache="${HOME:?neither LLMCC_DATA_CACHE, XDG_CACHE_HOME nor HOME is set}/.cache/llmcc"
fi
shared="${LLMCC_SHARED_DATA:-$repo/../shared/data}"

files_of() {
  case "$1" in
    gpt2) echo "encoder.json vocab.bpe" ;;
    tinyshakespeare) echo "input.txt" ;;
  esac
}
url_of() {  # set file
  if [ -n "${LLMCC_DATA_URL:-}" ]; then echo "$LLMCC_DATA_URL/$1/$2"; return; fi
  case "$1" in
    gpt2) echo "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/$2" ;;
    tinyshakespeare) echo "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt" ;;
  esac
}
has_all() {  # dir set
  local f
  for f in $(files_of "$2"); do [ -f "$1/$f" ] || return 1; done
}
# What llmcc's loaders check first, so a wrong download (an HTML error page) is refused here.
check() {  # set dir
  case "$1" in
    gpt2)
      [ "$(head -c 1 "$2/encoder.json")" = "{" ] || { echo "encoder.json is not a JSON object" >&2; return 1; }
      head -n 1 "$2/vocab.bpe" | grep -q '^#version' || { echo "vocab.bpe lacks its #version line" >&2; return 1; } ;;
    tinyshakespeare)
      [ "$(wc -c <"$2/input.txt" | tr -d ' ')" = 1115394 ] || { echo "input.txt is not 1,115,394 bytes" >&2; return 1; } ;;
  esac
}

for set in "${sets[@]}"; do
  found=""
  for dir in "$shared/$set" "$cache/$set"; do
    if has_all "$dir" "$set"; then found="$dir"; break; fi
  done
  if [ -n "$found" ]; then
    echo "$set: present in $found" >&2
  else
    if [ "${LLMCC_OFFLINE:-}" = 1 ]; then
      echo "$set: not in $shared/$set or $cache/$set, and LLMCC_OFFLINE=1" >&2; exit 1
    fi
    command -v curl >/dev/null 2>&1 || { echo "$set: curl is not installed (apt-get install curl)" >&2; exit 1; }
    work="$cache/$set.tmp-$$"
    rm -rf "$work"; mkdir -p "$work"
    trap 'rm -rf "$work"' EXIT
    for f in $(files_of "$set"); do
      url="$(url_of "$set" "$f")"
      echo "$set: downloading $url" >&2
      if ! curl -fsSL --connect-timeout 10 --max-time 300 -o "$work/$f" "$url"; then
        echo "$set: could not download $url (offline?); put the files in $shared/$set or $cache/$set" >&2
        exit 1
      fi
    done
    check "$set" "$work" || { echo "$set: the download is not what was expected; nothing kept" >&2; exit 1; }
    mkdir -p "$cache/$set"
    for f in $(files_of "$set"); do mv "$work/$f" "$cache/$set/$f"; done
    rm -rf "$work"; trap - EXIT
    found="$cache/$set"
    echo "$set: saved in $found" >&2
  fi
  [ "$print_dir" = 1 ] && echo "$found"
done
exit 0
