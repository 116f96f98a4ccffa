#!/usr/bin/env bash
# The PyTorch extension's tests (python/, docs/pytorch.md): creates or reuses the PyTorch venv
# (bench/setup_pytorch.sh), installs pytest, builds and installs llmcc_torch into the venv with
# the README's command, and runs python/tests with pytest.
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
bash bench/setup_pytorch.sh "$venv"
py="$venv/bin/python3"
"$py" -m pip install --quiet pytest
# The extension links against the torch it runs with: --no-build-isolation builds it in the venv.
MAX_JOBS="${MAX_JOBS:-$(nproc)}" "$py" -m pip install --quiet --no-build-isolation ./python
"$py" -c 'import llmcc_torch, torch; print(f"test_python: llmcc_torch on torch {torch.__version__}, GEMM kernel {llmcc_torch.matmul_kernel_name()}")'
# From the tests' folder, so `import llmcc_torch` is the installed package, not python/llmcc_torch.
cd python/tests
exec "$py" -m pytest -q -p no:cacheprovider "$@" .
