#!/usr/bin/env bash
# The PyTorch extension's tests (python/, docs/pytorch.md): creates or reuses the PyTorch venv
# (bench/setup_pytorch.sh), installs pytest, builds and installs llmcc_torch into the venv with
# the README's command, and runs python/tests with pytest. With an llmcc binary in
# LLMCC_BUILD_DIR, first the Hugging Face interchange tests (tests/hf: model folders made by
# transformers, read, evaluated and exported by that llmcc).
#
#   scripts/test_python.sh [pytest arguments]
#     LLMCC_TORCH_VENV   the venv (default: ~/.cache/llmcc/venv-torch, shared by every clone on
#                        the machine, since torch and its dependencies are about 5 GB)
#     LLMCC_BUILD_DIR    an llmcc build directory (configured with -fPIC, the default) whose
#                        libraries the extension links (default: build/python, made here)
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${LLMCC_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/llmcc/venv-torch}"
mkdir -p "$(dirname "$venv")"
# python/tests/test_compile.py checks torch.compile, so the venv's own check is skipped.
LLMCC_TORCH_COMPILE_CHECK=0 bash bench/setup_pytorch.sh "$venv"
py="$venv/bin/python3"
"$py" -m pip install --quiet pytest
# The extension links against the torch it runs with: --no-build-isolation builds it in the venv.
MAX_JOBS="${MAX_JOBS:-$(nproc)}" "$py" -m pip install --quiet --no-build-isolation ./python
if [ -n "${LLMCC_BUILD_DIR:-}" ] && [ -x "$LLMCC_BUILD_DIR/llmcc" ]; then
  (cd tests/hf && LLMCC_BINARY="$LLMCC_BUILD_DIR/llmcc" LLMCC_GRADIENT_DUMP="$LLMCC_BUILD_DIR/tests/hf/llmcc_gradient_dump" \
    "$py" -m pytest -q -p no:cacheprovider .)
fi
"$py" -c 'import llmcc_torch, torch; print(f"test_python: llmcc_torch on torch {torch.__version__}, GEMM kernel {llmcc_torch.matmul_kernel_name()}")'
# From the tests' folder, so `import llmcc_torch` is the installed package, not python/llmcc_torch.
cd python/tests
exec "$py" -m pytest -q -p no:cacheprovider "$@" .
