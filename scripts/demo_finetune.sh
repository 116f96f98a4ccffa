#!/usr/bin/env bash
# The fine-tuning demo: teach a small pretrained model a skill it does not have, with LoRA
# adapters over its frozen weights, on chat data with the loss on the assistant's replies only,
# and measure the skill on held-out questions before and after.
#
#   1. a byte-level tokenizer with a ChatML chat format (scripts/finetune_task.py tokenizer)
#   2. pretrain a small Llama on Tiny Shakespeare with it: the base model, which writes
#      Shakespeare-like text and knows nothing of the task
#   3. the task: write a word in capitals ("upper: strand" -> "STRAND"), random strings of 3 to 6
#      letters, so the held-out words are new; conversations in the format most SFT sets use
#   4. llmcc prepare --chat: the conversations in the chat format, packed, with loss masks
#   5. held-out accuracy of the base (greedy replies through llmcc generate --chat)
#   6. llmcc train --init-from <base> --lora-rank 16: adapters on every map, the base frozen
#   7. held-out accuracy with the adapters
#
# Usage: bash scripts/demo_finetune.sh      (a few minutes on 2 cores after the build)
# Environment (optional):
#   LLMCC_BUILD_DIR   build directory (default: build)
#   DEMO_THREADS      threads (default: every core)
set -euo pipefail
cd "$(dirname "$0")/.."

build="${LLMCC_BUILD_DIR:-build}"
threads="${DEMO_THREADS:-0}"
work="$build/runs/demo-finetune"
start=$(date +%s)
say() { printf '\n== %s\n' "$*"; }

say "0/7 system packages and the build (scripts/setup.sh, $build/)"
bash scripts/setup.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLMCC_TUNE=
cmake --build "$build" -j"$(nproc)" --target llmcc
llmcc="$build/llmcc"
rm -rf "$work"
mkdir -p "$work"

say "1/7 a byte-level tokenizer with a ChatML chat format"
python3 scripts/finetune_task.py tokenizer "$work/tokenizer"

say "2/7 pretrain the base: a small Llama (4 layers, 128 channels) on Tiny Shakespeare, one token per byte"
"$llmcc" prepare --input tinyshakespeare --tokenizer "hf:$work/tokenizer/tokenizer.json" --out "$work/shakespeare"
"$llmcc" train --model llama-tiny --vocab-size 259 \
  --train-data "$work/shakespeare/train_*.bin" --val-data "$work/shakespeare/val_*.bin" \
  --out-dir "$work/base" --steps 400 --batch-size 16 --seq-len 128 \
  --lr 3e-3 --min-lr 3e-4 --warmup-steps 40 --val-every 100 --val-steps 10 --sample-every 0 \
  --threads "$threads"
base=$(ls -1 "$work"/base/ckpt_*.bin | tail -n 1)

say "3/7 the task: write a word in capitals; 30,000 training conversations and 200 held-out words"
python3 scripts/finetune_task.py data "$work/task" 30000 200 1

say "4/7 llmcc prepare --chat: ChatML, conversations packed one after another, loss on the replies only"
"$llmcc" prepare --chat "$work/task/train.jsonl" --tokenizer "hf:$work/tokenizer/tokenizer.json" \
  --out "$work/chat"

say "5/7 the base model on the held-out words"
python3 scripts/finetune_task.py accuracy "$llmcc" "$base" "$work/task/heldout.jsonl" --show 5

say "6/7 LoRA fine-tuning: rank 16 adapters on q, k, v, o, gate, up, down; the base frozen"
"$llmcc" train --init-from "$base" --lora-rank 16 --lora-alpha 32 \
  --train-data "$work/chat/train_*.bin" --val-data "$work/chat/val_*.bin" \
  --out-dir "$work/lora" --steps 600 --batch-size 16 --seq-len 128 \
  --lr 3e-3 --min-lr 3e-4 --warmup-steps 50 --val-every 100 --val-steps 5 --sample-every 0 \
  --threads "$threads"
adapted=$(ls -1 "$work"/lora/ckpt_*.bin | tail -n 1)

say "7/7 the base model with the adapters on the held-out words"
python3 scripts/finetune_task.py accuracy "$llmcc" "$adapted" "$work/task/heldout.jsonl" --show 5

echo
echo "demo_finetune.sh: done in $(( $(date +%s) - start )) s; the adapters: $adapted (over $base)"
