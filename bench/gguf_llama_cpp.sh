#!/usr/bin/env bash
# bench/gguf_llama_cpp.py in its venv, made first when missing (bench/setup_llama_cpp.sh; building
# llama.cpp from source takes minutes the first time).
#
#   bench/gguf_llama_cpp.sh --llmcc build/llmcc [--check] [gguf_llama_cpp.py's other flags]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${LLMCC_GGUF_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/llmcc/venv-gguf}"
bash "$here/setup_llama_cpp.sh" "$venv"
exec "$venv/bin/python3" "$here/gguf_llama_cpp.py" "$@"
