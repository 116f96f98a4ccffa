"""Hugging Face model folders as people download them, against transformers itself.

transformers (from PyPI) makes randomly initialised models of real architectures (a Llama 3.2-style
Llama with tied embeddings and llama3 rope scaling, a SmolLM2-style Llama, Qwen3 with and without
tied embeddings, GPT-2) and saves them with save_pretrained as bf16 shards listed by
model.safetensors.index.json, the way checkpoints are published. Then:

* `llmcc eval` on the folder gives transformers' loss on the same tokens (transformers in float64
  on the same bf16 weights, so the difference is llmcc's fp32 arithmetic alone);
* `llmcc export --format safetensors` of that folder, sharded and in bf16, loads back into
  transformers with every tensor bit-identical to the original's, and in f32 with every tensor
  equal to the bf16 values widened; the folder's tokenizer.json and tokenizer_config.json go
  along unchanged.

Run by scripts/test_python.sh with LLMCC_BINARY set to the build's llmcc.
"""
import json
import os
import random
import struct
import subprocess

import pytest
import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file

LLMCC = os.environ.get("LLMCC_BINARY", "")
T = 24
SHARD = "60KB"  # small enough that every model here is split into several shards

pytestmark = pytest.mark.skipif(not os.access(LLMCC, os.X_OK),
                                reason="LLMCC_BINARY does not name the llmcc binary (scripts/test_python.sh sets it)")


def llama32_like():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=320, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=500000.0,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
        rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8}))


def smollm2_like():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=288, hidden_size=60, intermediate_size=128, num_hidden_layers=3, num_attention_heads=5,
        num_key_value_heads=5, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=100000.0,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2))


def qwen3_like(tied):
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=24, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=tied))


def gpt2_like():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=256, n_positions=64, n_embd=48, n_layer=2, n_head=4, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))


MODELS = {
    "llama3.2-like": llama32_like,
    "smollm2-like": smollm2_like,
    "qwen3-tied": lambda: qwen3_like(True),
    "qwen3-untied": lambda: qwen3_like(False),
    "gpt2": gpt2_like,
}


def write_tokens(path, tokens):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))


def run(*args):
    result = subprocess.run([LLMCC, *args], capture_output=True, text=True)
    assert result.returncode == 0, f"llmcc {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def llmcc_loss(folder, val):
    out = run("eval", "--ckpt", folder, "--val-data", val, "--batch-size", "1", "--seq-len", str(T), "--threads",
              "1", "--json")
    return json.loads(out)["loss"]


def transformers_loss(folder, tokens):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
    x, y = torch.tensor([tokens[:T]]), torch.tensor([tokens[1:T + 1]])
    with torch.no_grad():
        logits = model(x).logits
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)))


def add_tokenizer(folder, vocab_size):
    """A byte-level BPE tokenizer.json of exactly vocab_size ids (trained on a little text, padded
    with added tokens) and a tokenizer_config.json, as a downloaded folder has them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = "the quick brown fox jumps over the lazy dog; " * 50
    specials = ["<|endoftext|>"] if vocab_size > 257 else []  # 256 ids are the bytes alone
    tok.train_from_iterator([text], trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    tok.add_tokens([f"<|unused_{i}|>" for i in range(vocab_size - tok.get_vocab_size())])
    assert tok.get_vocab_size() == vocab_size
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": specials[0] if specials else None, "model_max_length": 64}, f)


def weights(folder):
    """Every tensor of a folder's safetensors (one file or its shards), by name."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.exists(index):
        return load_file(os.path.join(folder, "model.safetensors"))
    with open(index) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for shard in shards:
        out.update(load_file(os.path.join(folder, shard)))
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sharded_bf16_folder_evaluates_and_exports_as_transformers_reads_it(name, tmp_path):
    torch.manual_seed(20261128)
    model = MODELS[name]()
    with torch.no_grad():  # larger than the default init, so that attention and positions matter
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    folder = str(tmp_path / "downloaded")
    model.to(torch.bfloat16).save_pretrained(folder, max_shard_size=SHARD)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        assert len(set(json.load(f)["weight_map"].values())) >= 2, "the model should be saved in several shards"
    original = weights(folder)
    assert all(t.dtype == torch.bfloat16 for t in original.values())

    rng = random.Random(7)
    tokens = [rng.randrange(model.config.vocab_size) for _ in range(T + 1)]
    val = str(tmp_path / "val.bin")
    write_tokens(val, tokens)
    ours, theirs = llmcc_loss(folder, val), transformers_loss(folder, tokens)
    assert abs(ours - theirs) <= 2e-5 * max(1.0, abs(theirs)), f"loss: llmcc {ours}, transformers {theirs}"

    add_tokenizer(folder, model.config.vocab_size)
    exported = str(tmp_path / "exported")
    run("export", "--ckpt", folder, "--format", "safetensors", "--out", exported, "--weights-dtype", "bf16",
        "--max-shard-size", SHARD)
    assert os.path.exists(os.path.join(exported, "model.safetensors.index.json"))
    for name in ("tokenizer.json", "tokenizer_config.json"):  # the folder's tokenizer goes along
        with open(os.path.join(folder, name), "rb") as a, open(os.path.join(exported, name), "rb") as b:
            assert a.read() == b.read(), f"{name} differs after the export"
    back = weights(exported)
    for key, want in original.items():
        assert key in back, f"{key} is missing from the export"
        assert back[key].dtype == torch.bfloat16 and torch.equal(back[key], want), f"{key} differs after the export"
    # What transformers loads from the export computes the same loss.
    assert abs(transformers_loss(exported, tokens) - theirs) <= 1e-12 * max(1.0, abs(theirs))

    widened = str(tmp_path / "f32")
    run("export", "--ckpt", folder, "--format", "safetensors", "--out", widened)
    back = weights(widened)
    for key, want in original.items():
        assert back[key].dtype == torch.float32 and torch.equal(back[key], want.float()), f"{key} differs in f32"
    with open(os.path.join(widened, "config.json")) as f:
        assert json.load(f)["torch_dtype"] == "float32"
