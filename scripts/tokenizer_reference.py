#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/gpt2_reference.txt: an independent reference for llmcc's C++
GPT-2 tokenizer (src/text/gpt2_tokenizer.cpp), checked by tests/text/test_tokenizer.cpp.

The reference is tiktoken (OpenAI's Rust BPE) built from the same two local files the C++ code
reads, so nothing is downloaded at run time (tiktoken.get_encoding would fetch them):
  mergeable_ranks = encoder.json with its keys mapped back to bytes through GPT-2's
                    byte-to-unicode alphabet; pat_str = GPT-2's pattern; <|endoftext|> = 50256.

Setup:  pip install tiktoken
Run from the repository root:
  python3 scripts/tokenizer_reference.py [--gpt2-dir ../shared/data/gpt2]
                                         [--text ../shared/data/tinyshakespeare/input.txt]

The fixture holds, for all of Tiny Shakespeare, the token count, the FNV-1a 64 hash of the ids as
uint16 little-endian, and the first and last 1000 ids (the whole stream is ~676 KB, too big to
commit); and a list of tricky strings with their ids, each as UTF-8 hex.
"""
import argparse
import json
import os
import random
import struct
import sys

import tiktoken

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"
HEAD_TAIL = 1000


def bytes_to_unicode():
    """GPT-2's alphabet: printable Latin-1 bytes stand for themselves, the others get U+0100.."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def build_encoding(gpt2_dir):
    with open(os.path.join(gpt2_dir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    byte_decoder = {c: b for b, c in bytes_to_unicode().items()}
    ranks = {bytes(byte_decoder[c] for c in tok): i for tok, i in encoder.items() if tok != EOT}
    # vocab.bpe is implied by encoder.json for GPT-2 (token id == merge rank + 256); check it so a
    # mismatched pair of files cannot produce a silently different reference.
    with open(os.path.join(gpt2_dir, "vocab.bpe"), encoding="utf-8") as f:
        merges = [line.split() for line in f.read().split("\n")[1:] if line]
    for rank, (a, b) in enumerate(merges):
        merged = bytes(byte_decoder[c] for c in a + b)
        assert ranks[merged] == 256 + rank, f"vocab.bpe merge {rank} ({a} {b}) disagrees with encoder.json"
    return tiktoken.Encoding(name="gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={EOT: encoder[EOT]})


def fnv1a64_u16(ids):
    h = 0xCBF29CE484222325
    for byte in struct.pack(f"<{len(ids)}H", *ids):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def fnv1a64_bytes(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def tricky_strings():
    cases = [
        "",
        "Hello world",
        "Hello world<|endoftext|>",
        # contractions: only lower case is special in GPT-2's pattern
        "I'm sure you're right, they'll say we've done it; she'd've known it's John's.",
        "I'M SURE YOU'RE RIGHT; IT'S JOHN'S",
        "''s 's 't 're 've 'm 'll 'd 'x ' s'",
        "rock'n'roll o'clock ma'am y'all",
        # unicode letters, combining marks, scripts without spaces
        "café naïve Ωmega ﬁne straße İstanbul",
        "cafe\u0301 (combining acute)",
        "日本語のテキスト 中文 한국어",
        "Привет, мир! Γειά σου κόσμε",
        "مرحبا بالعالم ١٢٣ שלום",
        # numbers: digits, other scripts, letter-numbers and other numbers
        "12345678901234567890 3.14159 1,000,000 0x1F 2nd",
        "٠١٢٣٤٥ ०१२३ ⅠⅡⅢ Ⅻ ½ ² ³ ①②",
        # emoji and other symbols
        "emoji 👍🏽 👨‍👩‍👧 🇫🇷 ❤️ done",
        "€100 £5 ¥30 © ® ™ — … “quotes” «guillemets»",
        # whitespace: runs, trailing, newlines, tabs, unicode spaces
        "a  b   c    d",
        "trailing spaces   ",
        "   leading spaces",
        "\n\n\nthree newlines\n",
        "line\r\nwindows\r\n",
        "tab\there\t\tthere \t x",
        "nbsp\u00a0here\u3000ideographic\u2028line sep \u2003em",
        " ",
        "\n",
        "  \n  \n",
        # the special token
        "first<|endoftext|>second",
        "<|endoftext|><|endoftext|>",
        "<|endoftext|",
        "a <|endoftext|> b",
        "x<|endoftext|>\n\ny",
        # punctuation runs
        "!!!??? ... --- *** ''' \"\"\" <<>> @@##$$",
        "    def f(x):\n        return x**2  # comment\n",
        "https://example.com/path?q=1&r=2#frag",
        # letters and digits assigned in Unicode 15 and 16 (tiktoken's regex knows them): a
        # letter/digit before "'s" keeps the contraction apart, punctuation would swallow the "'"
        "\U00011F04's \U0001E030's \U00031350's \U0002EBF0's \u1C89's \U00010D40's \U000116D0's \U00016D40's",
        # a long piece without spaces (BPE cost must not blow up) and long runs
        "".join(random.Random(4).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3000)),
        " " * 300 + "x" + "\n" * 50 + "!" * 200,
    ]
    # A sweep through the code space, so the letter/number table is checked against tiktoken's:
    # "<c>'s" splits as <c> 's when c is a letter or digit but <c>' s when it is punctuation.
    sweep, chunk = [], []
    for cp in range(0xA0, 0x323B0, 251):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        chunk.append(f"{c}'s a{c}1 {c}")
        if len(chunk) == 60:
            sweep.append(" ".join(chunk))
            chunk = []
    if chunk:
        sweep.append(" ".join(chunk))
    return cases + sweep


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpt2-dir", default="../shared/data/gpt2")
    ap.add_argument("--text", default="../shared/data/tinyshakespeare/input.txt")
    ap.add_argument("--out", default="tests/fixtures/tokenizer/gpt2_reference.txt")
    args = ap.parse_args()

    enc = build_encoding(args.gpt2_dir)
    with open(args.text, "rb") as f:
        raw = f.read()
    ids = enc.encode(raw.decode("utf-8"), allowed_special={EOT})
    assert max(ids) < 65536

    lines = [
        f"# GENERATED by scripts/tokenizer_reference.py with tiktoken {tiktoken.__version__} "
        f"from encoder.json and vocab.bpe. Do not edit.",
        "# Tiny Shakespeare: input size and FNV-1a 64 of its bytes; token count; FNV-1a 64 of the ids",
        "# as uint16 little-endian; first and last 1000 ids.",
        f"input_bytes {len(raw)}",
        f"input_fnv1a64 {fnv1a64_bytes(raw):016x}",
        f"count {len(ids)}",
        f"ids_fnv1a64 {fnv1a64_u16(ids):016x}",
        "head " + " ".join(map(str, ids[:HEAD_TAIL])),
        "tail " + " ".join(map(str, ids[-HEAD_TAIL:])),
        "# Tricky strings: 'case <utf-8 hex, - if empty> <ids...>', each after a comment showing it.",
    ]
    for s in tricky_strings():
        case_ids = enc.encode(s, allowed_special={EOT})
        assert enc.decode(case_ids) == s
        shown = ascii(s)
        lines.append("# " + (shown if len(shown) <= 100 else shown[:97] + "..."))
        lines.append(f"case {s.encode('utf-8').hex() or '-'} " + " ".join(map(str, case_ids)))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}: Tiny Shakespeare {len(raw)} bytes -> {len(ids)} tokens, "
          f"{len(tricky_strings())} tricky strings")


if __name__ == "__main__":
    main()
