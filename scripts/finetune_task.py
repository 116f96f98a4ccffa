#!/usr/bin/env python3
"""The fine-tuning demo's pieces (scripts/demo_finetune.sh), Python's standard library only.

  tokenizer DIR       a byte-level tokenizer folder with a ChatML chat format: tokenizer.json
                      (ids 0-255 the bytes as GPT-2's byte-level alphabet writes them, no merges,
                      then <|im_start|> 256, <|im_end|> 257, <|endoftext|> 258) and
                      tokenizer_config.json (eos <|im_end|>, the ChatML template). One token per
                      character, so the task below is about characters, not about how a BPE
                      happened to split them.
  data DIR N M SEED   DIR/train.jsonl: N conversations of the task; DIR/heldout.jsonl: M more
                      whose words appear in none of the training ones.
  accuracy LLMCC CKPT HELDOUT [--show K]
                      greedy replies (llmcc generate --chat) to every held-out question; prints
                      the exact-match accuracy and the first K exchanges.

The task: write a word in capitals. "upper: strand" -> "STRAND". The words are random strings of 3
to 6 lowercase letters, so no answer can be remembered from the training set; the model has to
learn the operation (copy each letter, mapped to another token), which a model pretrained on
Shakespeare's text does not do when asked.
"""
import json
import os
import random
import subprocess
import sys

CHATML = ("{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]


def byte_alphabet():
    """GPT-2's byte-level alphabet: byte b -> the character that stands for it."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, extra = {}, 256
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(extra)
            extra += 1
    return chars


def write_tokenizer(folder):
    os.makedirs(folder, exist_ok=True)
    alphabet = byte_alphabet()
    vocab = {alphabet[b]: b for b in range(256)}
    added = [{"id": 256 + i, "content": t, "special": True} for i, t in enumerate(SPECIAL)]
    tokenizer = {
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tokenizer, f)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>", "chat_template": CHATML}, f)
    print(f"{folder}: byte-level tokenizer, {256 + len(SPECIAL)} tokens, ChatML chat format")


def word(rng):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 6)))


def conversation(w):
    return {"messages": [{"role": "user", "content": "upper: " + w}, {"role": "assistant", "content": w.upper()}]}


def write_data(folder, n_train, n_heldout, seed):
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(seed)
    heldout = set()
    while len(heldout) < n_heldout:
        heldout.add(word(rng))
    with open(os.path.join(folder, "heldout.jsonl"), "w") as f:
        for w in sorted(heldout):
            f.write(json.dumps(conversation(w)) + "\n")
    written = 0
    with open(os.path.join(folder, "train.jsonl"), "w") as f:
        while written < n_train:
            w = word(rng)
            if w in heldout:
                continue
            f.write(json.dumps(conversation(w)) + "\n")
            written += 1
    print(f"{folder}: {n_train} training conversations, {n_heldout} held-out words (none of them trained on)")


def accuracy(llmcc, ckpt, heldout, show):
    right, total, shown = 0, 0, []
    with open(heldout) as f:
        items = [json.loads(line) for line in f]
    for item in items:
        question = item["messages"][0]["content"]
        answer = item["messages"][1]["content"]
        out = subprocess.run([llmcc, "generate", "--ckpt", ckpt, "--chat", "--prompt", question, "--temperature", "0",
                              "--max-tokens", "12", "--threads", "1"], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"llmcc generate failed on '{question}':\n{out.stderr}")
        reply = out.stdout.strip()
        right += reply == answer
        total += 1
        if len(shown) < show:
            shown.append(f"  {question!r:24} -> {reply!r:12} ({'right' if reply == answer else 'expected ' + answer})")
    for line in shown:
        print(line)
    print(f"held-out accuracy: {right}/{total} = {100.0 * right / total:.1f}%")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd = sys.argv[1]
    if cmd == "tokenizer" and len(sys.argv) == 3:
        write_tokenizer(sys.argv[2])
    elif cmd == "data" and len(sys.argv) == 6:
        write_data(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "accuracy" and len(sys.argv) in (5, 7):
        show = int(sys.argv[6]) if len(sys.argv) == 7 and sys.argv[5] == "--show" else 0
        accuracy(sys.argv[2], sys.argv[3], sys.argv[4], show)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
