#!/usr/bin/env bash
# Creates the Python venv with PyTorch 2.x from PyPI that bench/compare.sh measures llmcc against
# (and that scripts/gpt2_reference.py can use). Idempotent: an existing venv with the pinned torch
# is left as it is.
#
#   bench/setup_pytorch.sh [VENV_DIR]
#     VENV_DIR              default $LLMCC_TORCH_VENV, else build/venv-torch in the repository
#                           (gitignored, like every build*/ directory)
#     LLMCC_TORCH_VERSION   torch version to install (default below)
#     LLMCC_TORCH_PYTHON    base interpreter for the venv (default /usr/bin/python3, Debian's)
#     LLMCC_TORCH_COMPILE_CHECK  0: skip the torch.compile check at the end of a new venv
#                           (scripts/test_python.sh, whose python/tests/test_compile.py checks it)
#
# Then: bench/compare.sh uses build/venv-torch/bin/python3 when it exists (or --python VENV/bin/python3).
#
# The choice (measured 2026-11-23):
# - torch 2.15.0: the newest on PyPI (`pip index versions torch`). It needs Python >= 3.11;
#   Debian 12's python3 is 3.11.2. PyPI is the only Python registry reachable here; the CPU-only
#   wheels live on the PyTorch project's own index, which is not, so this is the default Linux
#   x86_64 wheel, built with CUDA 13.2 (version 2.15.0+cu132), which runs on the CPU like a CPU
#   build (same libtorch_cpu; torch.cuda.is_available() is False).
# - A full install, dependencies and all: the venv takes about 5.3 GB (torch 1.2 GB, the nvidia-*
#   and cuda-* wheels most of the rest) and took 3 minutes to download here. `pip install
#   --no-deps torch` plus the pure-Python dependencies does NOT work: `import torch` fails with
#   "libcufile.so.0: cannot open shared object file", because libtorch.so links libcufile,
#   libcusparseLt and libnvshmem_host from the nvidia-* wheels. Installing just those three
#   would be a hand-picked, unsupported subset of torch's requirements, so the venv carries
#   everything pip resolves (`pip check` is clean).
# - Backends of this wheel (torch.__config__.show()): GEMMs in Intel MKL 2024.2 (BLAS_INFO=mkl),
#   oneDNN (MKL-DNN) 3.13.3, OpenMP, CPU capability AVX2 on Zen 3 (AVX512 on CPUs that have it).
# - torch.compile (inductor's C++ backend on CPU) needs a C++ compiler (g++, from
#   build-essential in scripts/setup.sh) and the base interpreter's Python.h: for Debian's
#   python3 that is python3-dev; venv creation needs python3-venv. Both are installed here with
#   apt-get when missing (base /usr/bin/python3 only). The script ends with a tiny compiled
#   forward + backward to say whether compile works (it does here; the first compile of a model
#   takes minutes on 2 busy cores, later runs reuse inductor's cache in /tmp/torchinductor_$USER).
# - numpy is installed too (scripts/gpt2_reference.py needs it; torch warns without it).
# - transformers and safetensors (pinned below) for the Hugging Face scripts: llama_reference.py
#   (the Llama parity fixtures are transformers' LlamaForCausalLM), hf_gpt2_roundtrip.py and
#   hf_llama_roundtrip.py. A venv that already has the pinned torch only gets these added.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
torch_version="${LLMCC_TORCH_VERSION:-2.15.0}"
# transformers: what tests/fixtures/llama was made with; gguf: llama.cpp's reader (tests/hf/test_gguf_export.py);
# sentencepiece: llama.cpp's converter imports it (bench/gguf_export_speed.py runs the converter here)
hf_packages=(transformers==5.23.0 safetensors==0.8.0 peft==0.21.2 gguf==0.19.0 sentencepiece==0.2.3)
base_python="${LLMCC_TORCH_PYTHON:-/usr/bin/python3}"
case "${1:-}" in
  -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
[[ $# -le 1 ]] || { echo "setup_pytorch.sh: expected at most one argument (the venv directory), got $#" >&2; exit 1; }
venv="${1:-${LLMCC_TORCH_VENV:-$root/build/venv-torch}}"
py="$venv/bin/python3"

installed_version() { "$py" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true; }

install_hf() {
  "$py" -m pip install --quiet --no-compile "${hf_packages[@]}"
  "$py" -m pip check
  "$py" -c 'import gguf, safetensors, transformers; print(f"setup_pytorch: transformers {transformers.__version__}, safetensors {safetensors.__version__}")'
}

if [[ -x "$py" && "$(installed_version)" == "$torch_version" ]]; then
  echo "setup_pytorch: torch $torch_version already installed in $venv"
  install_hf
  exit 0
fi

# The base interpreter needs the venv module and its C headers (torch.compile builds C++ against them).
base_ok() {
  "$base_python" - <<'EOF' 2>/dev/null
import ensurepip, os, sys, sysconfig, venv
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
EOF
}
if ! base_ok; then
  if [[ "$base_python" == /usr/bin/python3 ]]; then
    echo "setup_pytorch: installing python3-venv python3-dev (venv module, Python.h for torch.compile)"
    SUDO=""
    [[ "$(id -u)" -eq 0 ]] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends python3-venv python3-dev
  fi
  base_ok || { echo "setup_pytorch: $base_python lacks the venv module, ensurepip or Python.h" \
                    "(on Debian: apt-get install python3-venv python3-dev)" >&2; exit 1; }
fi
"$base_python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' ||
  { echo "setup_pytorch: torch $torch_version needs Python >= 3.11, $base_python is $("$base_python" -V 2>&1)" >&2; exit 1; }
command -v g++ > /dev/null || echo "setup_pytorch: warning: no g++, torch.compile will not work (scripts/setup.sh installs it)" >&2

echo "setup_pytorch: creating $venv ($("$base_python" -V 2>&1)) with torch $torch_version from PyPI (about 5 GB)"
"$base_python" -m venv "$venv"
# --no-compile: no .pyc up front for every installed module (torch's own are thousands); the ones
# a script imports are compiled when first imported.
"$py" -m pip install --quiet --no-compile "torch==$torch_version" numpy
install_hf

"$py" - <<'EOF'
import torch
x = torch.randn(64, 64, requires_grad=True)
(x @ x).sum().backward()
cfg = torch.__config__.show()
backends = [l.strip(" -") for l in cfg.splitlines() if "Math Kernel" in l or "MKL-DNN" in l or "CPU capability" in l]
print(f"setup_pytorch: torch {torch.__version__} runs on the CPU; " + "; ".join(backends))
EOF

if [[ "${LLMCC_TORCH_COMPILE_CHECK:-1}" == 0 ]]; then
  echo "setup_pytorch: done: $py (torch.compile not checked: LLMCC_TORCH_COMPILE_CHECK=0)"
  exit 0
fi
echo "setup_pytorch: checking torch.compile (inductor, C++ on CPU; takes a minute or two)"
if "$py" - <<'EOF'
import torch
torch.set_num_threads(2)
m = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(32, 1))
x = torch.randn(8, 32)
y = torch.compile(m)(x)
y.sum().backward()
assert torch.allclose(y, m(x), atol=1e-5), "compiled and eager outputs differ"
EOF
then
  echo "setup_pytorch: torch.compile works"
else
  echo "setup_pytorch: torch.compile does NOT work here (see the error above); compare.sh will report it and run eager only" >&2
fi
echo "setup_pytorch: done: $py"
