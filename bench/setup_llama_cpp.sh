#!/usr/bin/env bash
# Creates the Python venv with llama.cpp's own Python packages that bench/gguf_llama_cpp.py (and
# the slow ctest gguf.llama_cpp) check llmcc's GGUF files with. Idempotent: a venv that already
# has the pinned versions is left as it is.
#
#   bench/setup_llama_cpp.sh [VENV_DIR]
#     VENV_DIR   default $LLMCC_GGUF_VENV, else ~/.cache/llmcc/venv-gguf (shared by every clone)
#
# - llama-cpp-python 0.3.36: llama.cpp (commit 0c1e570) with Python bindings. PyPI has it as a
#   source distribution only, so pip compiles llama.cpp with the machine's CMake and g++ (about 6
#   minutes on 2 cores; -march=native, GGML_NATIVE's default). --no-binary keeps it that way
#   wherever a wheel appears.
# - gguf 0.19.0: llama.cpp's GGUF reader (gguf-py), the same as in tests/hf.
# - The source distribution carries llama.cpp's converter (vendor/llama.cpp/convert_hf_to_gguf.py
#   and conversion/); it is kept in VENV_DIR/llama.cpp for the export-speed comparison.
set -euo pipefail
venv="${1:-${LLMCC_GGUF_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/llmcc/venv-gguf}}"
version=0.3.36
py="$venv/bin/python3"
if [[ -x "$py" ]] && "$py" -c "import llama_cpp, gguf, sys; sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null &&
  [[ -f "$venv/llama.cpp/convert_hf_to_gguf.py" ]]; then
  echo "setup_llama_cpp: llama-cpp-python $version already installed in $venv"
  exit 0
fi
mkdir -p "$(dirname "$venv")"
[[ -x "$py" ]] || /usr/bin/python3 -m venv "$venv"
if ! "$py" -c "import llama_cpp, gguf, sys; sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null; then
  echo "setup_llama_cpp: building llama-cpp-python $version from source (minutes)"
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$py" -m pip install --quiet --no-binary llama-cpp-python \
    "llama-cpp-python==$version" gguf==0.19.0 numpy
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$tmp"
tar -xzf "$tmp"/llama_cpp_python-"$version".tar.gz -C "$tmp"
rm -rf "$venv/llama.cpp"
mkdir -p "$venv/llama.cpp"
src="$tmp/llama_cpp_python-$version/vendor/llama.cpp"
cp -r "$src/convert_hf_to_gguf.py" "$src/gguf-py" "$venv/llama.cpp/"
[[ -d "$src/conversion" ]] && cp -r "$src/conversion" "$venv/llama.cpp/"
"$py" -c 'import llama_cpp, gguf; print(f"setup_llama_cpp: llama-cpp-python {llama_cpp.__version__}, gguf ready")'
