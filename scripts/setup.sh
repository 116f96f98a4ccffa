#!/usr/bin/env bash
# Installs every system package llmcc needs, from Debian, with apt-get. Idempotent: it checks
# what is present first and installs only what is missing, saying what it installs.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  ninja-build lld                              # the test command's builds: Ninja, and lld to link its ~100 test programs
  libgtest-dev libgmock-dev libbenchmark-dev   # tests and benchmarks
  libdnnl-dev                                  # GEMM peer: oneDNN dnnl_sgemm (-DLLMCC_GEMM=onednn; the default is llmcc's own, docs/perf.md)
  libopenblas-openmp-dev libblis-openmp-dev    # GEMM peers measured by bench/ (-DLLMCC_GEMM=openblas|blis)
  llvm-19-dev libclang-19-dev clang-19         # adgen (Clang LibTooling)
  clang-format-19                              # the C++ layout check (scripts/check_format.sh)
  libomp-19-dev libclang-rt-19-dev             # clang-19 builds: LLVM's OpenMP runtime (g++ uses its own
                                               # libgomp), sanitizers, libFuzzer (fuzz/)
  libsentencepiece-dev                         # SentencePiece tokenizers (llmcc prepare/train-tokenizer --tokenizer sp:)
  libpcre2-dev libicu-dev                      # tokenizer.json: split regexes (PCRE2), NFC (ICU)
  libopenmpi-dev openmpi-bin                   # data-parallel training across processes (mpirun; docs/distributed.md)
  nlohmann-json3-dev                           # JSON: safetensors headers, config.json, encoder.json (docs/architecture.md)
  libsimdjson-dev                              # bench/bench_json.cpp's comparison only
  python3
  curl ca-certificates                         # data llmcc fetches when it has no copy (scripts/fetch_data.sh)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} system packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
