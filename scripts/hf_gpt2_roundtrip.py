#!/usr/bin/env python3
"""GPT-2 round trip through Hugging Face transformers (issue 6, deliverable 4's GPT-2 half).

1. `llmcc export --format safetensors` turns the parity fixture's weights
   (tests/fixtures/gpt2/model.bin, an llm.c file) into a Hugging Face directory.
2. transformers' GPT2LMHeadModel.from_pretrained loads it (float64 compute) and its logits and
   loss on the fixture batch are compared with the fixture's (tests/fixtures/gpt2/logits.bin and
   reference.txt, the float64 PyTorch reference that tests/models/test_gpt2_parity.cpp holds
   llmcc to): the export must give transformers the same model llmcc computes.
3. save_pretrained writes the loaded model back (transformers' own safetensors: its names, its
   tied-weight handling); `llmcc export --format llmc` reads that directory and must reproduce
   the original model.bin byte for byte.

Not a default test (CI has no PyPI packages). Needs torch, transformers and safetensors
(bench/setup_pytorch.sh installs them in build/venv-torch). scripts/llama_reference.py --llmcc
runs it too (main takes argv):
  build/venv-torch/bin/python3 scripts/hf_gpt2_roundtrip.py --llmcc build/llmcc
Exit status 0 when everything matches, 1 otherwise.
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import transformers


def read_reference(path):
    out = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                out[k] = v
    return out


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmcc", required=True, help="path to the llmcc binary")
    ap.add_argument("--fixtures", default=os.path.join(here, "..", "tests", "fixtures", "gpt2"))
    ap.add_argument("--atol", type=float, default=2e-5, help="logits tolerance (fp32 weights, float64 compute)")
    args = ap.parse_args(argv)

    ref = read_reference(os.path.join(args.fixtures, "reference.txt"))
    V, Vp = int(ref["model.vocab_size"]), int(ref["model.padded_vocab_size"])
    with open(os.path.join(args.fixtures, "batch.bin"), "rb") as f:
        B, T = struct.unpack("<2i", f.read(8))
        data = np.frombuffer(f.read(), dtype="<i4")
    idx = torch.from_numpy(data[: B * T].reshape(B, T).astype(np.int64))
    targets = torch.from_numpy(data[B * T: 2 * B * T].reshape(B, T).astype(np.int64))
    want_logits = np.fromfile(os.path.join(args.fixtures, "logits.bin"), dtype="<f4").reshape(B, T, Vp)[:, :, :V]
    want_loss = float(ref["loss"])

    ok = True
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        subprocess.run([args.llmcc, "export", "--ckpt", os.path.join(args.fixtures, "model.bin"),
                        "--format", "safetensors", "--out", hf], check=True)
        model = transformers.GPT2LMHeadModel.from_pretrained(hf).double().eval()
        with torch.no_grad():
            logits = model(idx).logits
        got = logits.numpy()
        diff = float(np.abs(got - want_logits).max())
        loss = float(F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1))
        print(f"logits {tuple(got.shape)}: max |transformers - reference| = {diff:.3g} (atol {args.atol:g})")
        print(f"loss: transformers {loss:.10f}, reference {want_loss:.10f}, diff {abs(loss - want_loss):.3g}")
        ok = ok and diff <= args.atol and abs(loss - want_loss) <= 1e-6

        # transformers writes it back; llmcc reads transformers' own file.
        saved = os.path.join(tmp, "saved")
        model.float().save_pretrained(saved)
        back = os.path.join(tmp, "back.bin")
        subprocess.run([args.llmcc, "export", "--ckpt", saved, "--format", "llmc", "--out", back], check=True)
        with open(back, "rb") as a, open(os.path.join(args.fixtures, "model.bin"), "rb") as b:
            same = a.read() == b.read()
        print(f"save_pretrained -> llmcc export --format llmc: {'identical to' if same else 'DIFFERS from'} model.bin")
        ok = ok and same
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
