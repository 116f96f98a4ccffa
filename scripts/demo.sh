#!/usr/bin/env bash
# The main job on a fresh machine (Debian bookworm, root or sudo): install the system packages,
# build llmcc, tokenize Tiny Shakespeare, train a small GPT-2 on it for a few minutes while
# printing training and validation loss and samples, then generate text from the final
# checkpoint and draw the log (loss, learning rate, tokens/s, gradient norm) as an SVG. The
# Llama mode trains a SentencePiece BPE tokenizer on the text first and a small Llama on its
# tokens.
#
# Usage: bash scripts/demo.sh                    # GPT-2 with GPT-2's tokenizer
#        DEMO_MODEL=llama bash scripts/demo.sh   # Llama with a SentencePiece tokenizer
# Environment (optional):
#   DEMO_MODEL        gpt2 (default) or llama
#   LLMCC_BUILD_DIR   build directory (default: build)
#   DEMO_STEPS        optimizer steps (default 250: 2 to 6 minutes of training on 2 cores)
#   DEMO_THREADS      threads (default: every core)
set -euo pipefail
cd "$(dirname "$0")/.."

build="${LLMCC_BUILD_DIR:-build}"
steps="${DEMO_STEPS:-250}"   # 250 x 2,048 tokens; a step is about 0.33 s on a 2-core Zen 5 (AVX-512), 0.8 s on a Zen 3 (AVX2; 1.3 s before the own GEMM and vectorised exp)
threads="${DEMO_THREADS:-0}"
model="${DEMO_MODEL:-gpt2}"
warmup=$(( steps < 240 ? steps / 8 : 30 ))   # learning-rate warm-up, shorter for short runs
case "$model" in
  gpt2) data="$build/data/tinyshakespeare"; run="$build/runs/demo" ;;
  llama) data="$build/data/tinyshakespeare-sp4096"; run="$build/runs/demo-llama" ;;
  *) echo "demo.sh: DEMO_MODEL is '$model', expected gpt2 or llama" >&2; exit 2 ;;
esac
start=$(date +%s)

say() { printf '\n== %s\n' "$*"; }

say "1/5 system packages (scripts/setup.sh)"
bash scripts/setup.sh

say "2/5 configure and build llmcc (Release, $build/)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLMCC_TUNE=  # the tuning -march=native implies
cmake --build "$build" -j"$(nproc)" --target llmcc
llmcc="$build/llmcc"

if [ "$model" = gpt2 ]; then
  say "3/5 tokenize Tiny Shakespeare into $data"
  "$llmcc" prepare --input tinyshakespeare --out "$data"

  say "4/5 train a small GPT-2 (gpt2-tiny: 4 layers, 4 heads, 128 channels, GPT-2's 50,257-token vocabulary; 7M parameters)"
  rm -rf "$run"
  # The validation loss starts at ln(50257) = 10.8 (step 0) and is printed every 50 steps.
  "$llmcc" train --model gpt2-tiny \
    --train-data "$data/train_*.bin" --val-data "$data/val_*.bin" \
    --out-dir "$run" --steps "$steps" --batch-size 16 --seq-len 128 \
    --lr 2e-3 --min-lr 2e-4 --warmup-steps "$warmup" \
    --val-every 50 --val-steps 20 --sample-every 125 --sample-tokens 48 \
    --threads "$threads"
else
  say "3/5 train a SentencePiece BPE tokenizer (4,096 tokens) on Tiny Shakespeare and tokenize it into $data"
  # Tiny Shakespeare by name: from ../shared/data, the download cache, or downloaded (scripts/fetch_data.sh).
  "$llmcc" train-tokenizer --input tinyshakespeare --vocab-size 4096 --out "$data/tok4096"
  # prepare records the tokenizer in $data/tokenizer.txt (with a copy of the model); train stores
  # it in every checkpoint, so neither train nor generate needs it named again.
  "$llmcc" prepare --input tinyshakespeare --tokenizer "sp:$data/tok4096.model" --out "$data"

  say "4/5 train a small Llama (llama-tiny: 4 layers, 4 heads over 2 key/value heads, 128 channels, SwiGLU, RoPE; the 4,096-token vocabulary; 1.8M parameters)"
  rm -rf "$run"
  # The validation loss starts at ln(4096) = 8.3 (step 0) and is printed every 50 steps.
  "$llmcc" train --model llama-tiny --vocab-size 4096 \
    --train-data "$data/train_*.bin" --val-data "$data/val_*.bin" \
    --out-dir "$run" --steps "$steps" --batch-size 16 --seq-len 128 \
    --lr 2e-3 --min-lr 2e-4 --warmup-steps "$warmup" \
    --val-every 50 --val-steps 20 --sample-every 125 --sample-tokens 48 \
    --threads "$threads"
fi

say "5/5 generate from the final checkpoint"
ckpt=$(ls -1 "$run"/ckpt_*.bin | tail -n 1)
# Every speech is a document (prepare puts GPT-2's <|endoftext|> or SentencePiece's bos before
# each); keep going past them. The checkpoint names its tokenizer.
"$llmcc" generate --ckpt "$ckpt" --prompt "ROMEO:" --max-tokens 150 --temperature 0.8 --top-k 40 \
  --no-stop-at-eot --threads "$threads"
echo

"$llmcc" plot "$run" --out "$run/plot.svg" --title "llmcc demo: $model on Tiny Shakespeare"

say "done in $(( $(date +%s) - start )) s; the log of every step is $run/log.jsonl, its plot $run/plot.svg"
