"""LoRA adapters between llmcc and PEFT, on randomly initialised transformers models of real
architectures (a SmolLM2-style Llama with tied embeddings, an untied Llama, Qwen3, GPT-2).

* `llmcc train --init-from <folder> --lora-rank 4` trains adapters on every map the family has
  (q, k, v, o, gate, up and down; GPT-2's c_attn, c_proj and c_fc, Conv1D layers in transformers,
  each with its bias); `llmcc export --format peft` writes them; peft.PeftModel.from_pretrained loads them onto
  transformers' model of the folder and its loss on held-out tokens equals `llmcc eval` of the
  adapter checkpoint (transformers + PEFT in float64), and differs from the base's;
* `llmcc eval` of that PEFT directory itself (the base found through base_model_name_or_path)
  and of `llmcc export --merge-lora --format safetensors` (loaded by transformers alone) give the
  same loss, as does PEFT's merge_and_unload.

The gradients against PEFT's are tests/models/test_lora_parity.cpp's (fixtures) and
test_hf_gradients.py's (sizes drawn per run). Run by scripts/test_python.sh with LLMCC_BINARY set
to the build's llmcc.
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

peft = pytest.importorskip("peft")

LLMCC = os.environ.get("LLMCC_BINARY", "")
T = 24

pytestmark = pytest.mark.skipif(not os.access(LLMCC, os.X_OK),
                                reason="LLMCC_BINARY does not name the llmcc binary (scripts/test_python.sh sets it)")


def smollm2_like():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=288, hidden_size=60, intermediate_size=128, num_hidden_layers=2, num_attention_heads=5,
        num_key_value_heads=5, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=100000.0,
        tie_word_embeddings=True))


def llama_untied():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000.0,
        tie_word_embeddings=False))


def qwen3_like():
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=24, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=True))


def gpt2_like():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=256, n_embd=48, n_layer=2, n_head=4, n_positions=64))


MODELS = {"smollm2-like": smollm2_like, "llama-untied": llama_untied, "qwen3": qwen3_like, "gpt2": gpt2_like}
MODULES = {name: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] for name in MODELS}
MODULES["gpt2"] = ["c_attn", "c_proj", "c_fc"]


def write_tokens(path, tokens):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))


def run(*args):
    result = subprocess.run([LLMCC, *args], capture_output=True, text=True)
    assert result.returncode == 0, f"llmcc {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def llmcc_loss(ckpt, val):
    out = run("eval", "--ckpt", ckpt, "--val-data", val, "--batch-size", "1", "--seq-len", str(T), "--steps", "1",
              "--threads", "1", "--json")
    return json.loads(out)["loss"]


def loss_of(model, tokens, vocab):
    x, y = torch.tensor([tokens[:T]]), torch.tensor([tokens[1:T + 1]])
    with torch.no_grad():
        logits = model(x).logits
    return float(F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1)))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_adapters_round_trip_between_llmcc_and_peft(name, tmp_path):
    torch.manual_seed(3)
    model = MODELS[name]()
    vocab = model.config.vocab_size
    base = str(tmp_path / "base")
    model.save_pretrained(base)
    rng = random.Random(5)
    train = [rng.randrange(vocab) for _ in range(3000)]
    held_out = [rng.randrange(vocab) for _ in range(T + 1)]
    write_tokens(tmp_path / "train.bin", train)
    write_tokens(tmp_path / "val.bin", held_out)

    run("train", "--init-from", base, "--lora-rank", "4", "--lora-alpha", "8", "--steps", "6", "--lr", "3e-2",
        "--train-data", str(tmp_path / "train.bin"), "--batch-size", "2", "--seq-len", str(T), "--threads", "2",
        "--out-dir", str(tmp_path / "run"), "--quiet")
    ckpt = str(tmp_path / "run" / "ckpt_000006.bin")
    adapter = str(tmp_path / "adapter")
    run("export", "--ckpt", ckpt, "--format", "peft", "--out", adapter)
    with open(os.path.join(adapter, "adapter_config.json")) as f:
        config = json.load(f)
    assert config["r"] == 4 and config["lora_alpha"] == 8
    assert sorted(config["target_modules"]) == sorted(MODULES[name])
    assert config["fan_in_fan_out"] == (name == "gpt2")

    reference = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=torch.float64).eval()
    base_loss = loss_of(reference, held_out, vocab)
    with_adapters = peft.PeftModel.from_pretrained(reference, adapter).eval()
    want = loss_of(with_adapters, held_out, vocab)
    val = str(tmp_path / "val.bin")
    assert abs(llmcc_loss(ckpt, val) - want) <= 1e-5 * want
    assert abs(want - base_loss) > 1e-4, "the adapters change nothing: the test would not see them"

    # The PEFT directory as llmcc's model path, and the merged export in transformers alone.
    assert abs(llmcc_loss(adapter, val) - want) <= 1e-5 * want
    merged = str(tmp_path / "merged")
    run("export", "--ckpt", ckpt, "--merge-lora", "--format", "safetensors", "--out", merged)
    alone = transformers.AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float64).eval()
    assert abs(loss_of(alone, held_out, vocab) - want) <= 1e-5 * want
    assert abs(loss_of(with_adapters.merge_and_unload(), held_out, vocab) - want) <= 1e-5 * want
