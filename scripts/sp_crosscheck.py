#!/usr/bin/env python3
"""Cross-checks llmcc's SentencePiece support against the Python sentencepiece package (PyPI).

1. `llmcc train-tokenizer` trains a BPE model on TEXT.
2. The Python package loads that .model and encodes TEXT (whole, and line by line); llmcc does the
   same with `llmcc tokenize --tokenizer sp:MODEL`. The ids must be identical, and both decodes
   must give TEXT back.
3. Informational: the Python trainer trains with the same settings; the script says whether its
   vocabulary equals llmcc's (Debian's libsentencepiece and the PyPI wheel may be different
   versions, so this is reported, not required).

Not a default test (CI has no PyPI packages). Usage:
  python3 -m venv venv && venv/bin/pip install sentencepiece
  venv/bin/python scripts/sp_crosscheck.py --llmcc build/llmcc --text ../shared/data/tinyshakespeare/input.txt
Exit status 0 when everything required matches, 1 otherwise.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import sentencepiece as spm


def llmcc_ids(llmcc, model, path):
    out = subprocess.run([llmcc, "tokenize", "--tokenizer", "sp:" + model, "--file", path],
                         check=True, capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmcc", required=True, help="path to the llmcc binary")
    ap.add_argument("--text", required=True, help="UTF-8 text file to train on and encode")
    ap.add_argument("--vocab-size", type=int, default=1024)
    ap.add_argument("--max-bytes", type=int, default=300_000, help="use the first N bytes of TEXT")
    args = ap.parse_args()

    with open(args.text, "rb") as f:
        data = f.read()[: args.max_bytes].decode("utf-8", errors="ignore")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "input.txt")
        with open(text, "w", encoding="utf-8", newline="") as f:
            f.write(data)
        prefix = os.path.join(tmp, "tok")
        subprocess.run([args.llmcc, "train-tokenizer", "--input", text, "--vocab-size", str(args.vocab_size),
                        "--out", prefix], check=True, capture_output=True)
        model = prefix + ".model"
        sp = spm.SentencePieceProcessor(model_file=model)
        print(f"sentencepiece {spm.__version__}; model {model}: {sp.get_piece_size()} pieces, "
              f"bos {sp.bos_id()} eos {sp.eos_id()} unk {sp.unk_id()}")

        # Whole text, then every line on its own (llmcc encodes a file as one string).
        cases = [("whole text", data)] + [(f"line {i}", line) for i, line in enumerate(data.split("\n")[:300])]
        mismatches = 0
        for name, s in cases:
            path = os.path.join(tmp, "case.txt")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(s)
            want = sp.encode(s)
            got = llmcc_ids(args.llmcc, model, path)
            if got != want:
                mismatches += 1
                if mismatches <= 5:
                    print(f"MISMATCH {name}: python {want[:20]}... llmcc {got[:20]}...")
            if sp.decode(want) != s:
                print(f"python decode differs from the input for {name}")
                ok = False
        print(f"encode: {len(cases) - mismatches} of {len(cases)} cases identical "
              f"({len(sp.encode(data))} ids for {len(data)} characters)")
        ok = ok and mismatches == 0

        # Informational: the Python trainer with the same settings.
        py_prefix = os.path.join(tmp, "py")
        spm.SentencePieceTrainer.train(
            input=text, model_prefix=py_prefix, model_type="bpe", vocab_size=args.vocab_size,
            character_coverage=1.0, byte_fallback=True, normalization_rule_name="identity",
            remove_extra_whitespaces=False, add_dummy_prefix=True, split_digits=True,
            allow_whitespace_only_pieces=True, max_sentence_length=16384, input_sentence_size=0,
            shuffle_input_sentence=False, num_threads=1, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            minloglevel=2)
        py = spm.SentencePieceProcessor(model_file=py_prefix + ".model")
        same = [py.id_to_piece(i) for i in range(py.get_piece_size())] == \
               [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        print(f"python-trained vocabulary {'equals' if same else 'differs from'} llmcc's "
              f"(informational: library versions may differ)")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
