"""tokenizer.json in llmcc against the `tokenizers` library (Rust, from PyPI) that defines it.

The tokenizer.json files are made here with `tokenizers`: GPT-2's real vocabulary (from
../shared/data/gpt2) and byte-level BPEs trained on Tiny Shakespeare with Llama 3's and Qwen2's
pre-tokenizers (Qwen2's with its NFC normalizer, Llama 3's with ignore_merges), each with special
and ordinary added tokens, and SentencePiece-style BPEs (Metaspace with byte fallback; unsplit
with unk; the Prepend and Replace normalizers of converted Llama 2 files). For each, `llmcc tokenize` must give the ids `tokenizers` gives on all
of Tiny Shakespeare, a corpus of multilingual text, emoji, whitespace runs and added tokens, and
10,000 random strings; special tokens are recognised only where asked; and, byte-level ones,
decode(encode(x)) == x, also for bytes that are not UTF-8, SentencePiece-style ones, the text
tokenizers' decode gives.

Run by scripts/test_python.sh with LLMCC_BINARY set to the build's llmcc.
"""
import json
import os
import random
import subprocess

import pytest
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

LLMCC = os.environ.get("LLMCC_BINARY", "")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("LLMCC_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
REQUIRE_DATA = os.environ.get("LLMCC_TEST_REQUIRE_DATA") == "1"

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

pytestmark = pytest.mark.skipif(not os.access(LLMCC, os.X_OK),
                                reason="LLMCC_BINARY does not name the llmcc binary (scripts/test_python.sh sets it)")


def shared(*parts):
    path = os.path.join(SHARED, *parts)
    if not os.path.exists(path):
        if REQUIRE_DATA:
            pytest.fail(f"{path} is missing (LLMCC_TEST_REQUIRE_DATA=1)")
        pytest.skip(f"{path} is missing: the shared data (README) is not beside the repository")
    return path


def shakespeare():
    with open(shared("tinyshakespeare", "input.txt"), encoding="utf-8") as f:
        return f.read()


CORPUS = [
    "Hello world", " Hello  world ", "I'm here, you're there; they'LL see. DON'T", "  \n\n\t  x  \r\n y",
    "Grüße aus Köln — naïve café", "東京は日本の首都です。", "Привет, как дела?", "مرحبا بالعالم",
    "नमस्ते दुनिया", "👋🏽 emoji 🇫🇷 family 👨‍👩‍👧 ok", "numbers 1234567 3.14159 -42 1e-9", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
    "e\u0301 vs é (NFC)", "tabs\t\tand   spaces    end   ", "<|endoftext|>text<|endoftext|>", "a<|im_start|>b",
    "x <|begin_of_text|> y", "foo<extra>bar <extra> baz", "", " ", "\n", "'s 's's", "ends with space ",
]


def random_strings(n, seed):
    rng = random.Random(seed)
    alphabet = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") +
                list(" \t\n\r'\".,;:!?-_()[]{}<>|/\\@#$%^&*+=~`") + list("éüßçñøåÆŒ") + list("日本語中文한국어") +
                list("👍🏻🎉🦀") + ["\u0301", "\u200b", "\u00a0", "\u3000", "<|endoftext|>", "<extra>"])
    return ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(n)]


def gpt2_tokenizer(folder):
    vocab = os.path.join(folder, "vocab.json")
    with open(shared("gpt2", "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(vocab, "w", encoding="utf-8") as f:
        json.dump(encoder, f)
    tok = Tokenizer(models.BPE.from_file(vocab, shared("gpt2", "vocab.bpe")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    tok.add_tokens(["<extra>"])
    return tok


def trained_tokenizer(pattern, nfc, ignore_merges, specials):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=specials, show_progress=False)
    tok.train_from_iterator([shakespeare()] + CORPUS, trainer)
    tok.add_tokens(["<extra>"])
    return tok


def metaspace_tokenizer(scheme, split, byte_fallback, legacy=False):
    """A SentencePiece-style BPE trained on Tiny Shakespeare with a Metaspace pre-tokenizer (or, as
    converted Llama 2 files, the Prepend and Replace normalizers and no pre-tokenizer), an alphabet
    limited to 80 characters so that the corpus needs byte fallback (the 256 <0xXX> tokens added
    to the model's vocabulary) or unk (fused)."""
    trainer = trainers.BpeTrainer(vocab_size=1200, limit_alphabet=80, special_tokens=["<unk>", "<s>", "</s>"],
                                  show_progress=False)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.train_from_iterator([shakespeare()] + CORPUS[:3], trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    if byte_fallback:
        for i in range(256):
            vocab.setdefault(f"<0x{i:02X}>", len(vocab))
    spec["model"].update(byte_fallback=byte_fallback, fuse_unk=True, unk_token="<unk>")
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split}
    if legacy:
        spec["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        spec["pre_tokenizer"] = None
        spec["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    else:
        spec["pre_tokenizer"] = metaspace
        spec["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, dict(metaspace)]}
    out = Tokenizer.from_str(json.dumps(spec))
    # Found in the raw text: after the Prepend normalizer a normalized one would match only after
    # a space (llmcc refuses that).
    out.add_tokens([AddedToken("<extra>", normalized=False)])
    return out


TOKENIZERS = {
    "gpt2": lambda folder: gpt2_tokenizer(folder),
    "llama3-style": lambda folder: trained_tokenizer(LLAMA3_PATTERN, False, True,
                                                     ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]),
    "qwen2-style": lambda folder: trained_tokenizer(QWEN2_PATTERN, True, False,
                                                    ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
    "sentencepiece-style": lambda folder: metaspace_tokenizer("always", True, True),
    "sentencepiece-style-first-unsplit-unk": lambda folder: metaspace_tokenizer("first", False, False),
    "llama2-converted": lambda folder: metaspace_tokenizer("always", False, True, legacy=True),
}


def llmcc_lines(tokenizer, strings, ordinary, tmp_path):
    path = str(tmp_path / "strings.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for s in strings:
            f.write(json.dumps(s) + "\n")
    args = [LLMCC, "tokenize", "--tokenizer", "hf:" + tokenizer, "--json-lines", path]
    result = subprocess.run(args + (["--ordinary"] if ordinary else []), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == len(strings)
    return [[int(t) for t in line.split()] for line in lines]


def expect_same(tok, path, strings, tmp_path, what):
    theirs_special = [e.ids for e in tok.encode_batch(strings, add_special_tokens=False)]
    ours = llmcc_lines(path, strings, False, tmp_path)
    for s, a, b in zip(strings, ours, theirs_special):
        assert a == b, f"{what}: {s!r}: llmcc {a[:20]}..., tokenizers {b[:20]}..."
    # Special tokens as ordinary text: tokenizers' encode_special_tokens.
    tok.encode_special_tokens = True
    theirs_plain = [e.ids for e in tok.encode_batch(strings, add_special_tokens=False)]
    tok.encode_special_tokens = False
    ours = llmcc_lines(path, strings, True, tmp_path)
    for s, a, b in zip(strings, ours, theirs_plain):
        assert a == b, f"{what} (specials as text): {s!r}: llmcc {a[:20]}..., tokenizers {b[:20]}..."


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_ids_equal_tokenizers_and_decode_round_trips(name, tmp_path):
    tok = TOKENIZERS[name](str(tmp_path))
    path = str(tmp_path / "tokenizer.json")
    tok.save(path)
    text = shakespeare()
    expect_same(tok, path, [text], tmp_path, "Tiny Shakespeare")
    expect_same(tok, path, CORPUS, tmp_path, "corpus")
    expect_same(tok, path, random_strings(10000, 17), tmp_path, "random strings")
    # SentencePiece-style decoders drop a leading space and unk loses text: llmcc decodes as
    # tokenizers does, on the ids of every corpus string.
    if name.startswith(("sentencepiece", "llama2")):
        for s in CORPUS:
            ids = tok.encode(s, add_special_tokens=False).ids
            back = subprocess.run([LLMCC, "tokenize", "--tokenizer", "hf:" + path, "--decode", *map(str, ids)],
                                  capture_output=True).stdout if ids else b""
            assert back.decode("utf-8") == tok.decode(ids, skip_special_tokens=False), f"decode of {s!r}"
        return
    # Decoding gives the text back, also for text that is not UTF-8 (encoded by llmcc alone).
    for s in CORPUS[:12] + [b"\xff\xfe bytes \xc3( \xe2\x82 end"]:
        raw = s.encode("utf-8") if isinstance(s, str) else s
        ids = subprocess.run([LLMCC, "tokenize", "--tokenizer", "hf:" + path, "--file", "-"], input=raw,
                             capture_output=True).stdout.split()
        back = subprocess.run([LLMCC, "tokenize", "--tokenizer", "hf:" + path, "--decode", *map(bytes.decode, ids)],
                              capture_output=True).stdout if ids else b""
        assert back == raw, f"decode(encode({raw!r})) = {back!r}"
