"""`llmcc export --format gguf` read back by llama.cpp's own Python package, `gguf` (PyPI).

transformers makes randomly initialised models of each family llama.cpp has an architecture for
(Llama untied with grouped-query attention, Llama tied with Llama 3's rope scaling, Qwen3 tied with
a head size of its own, Qwen3 untied with rows no 256-value super-block divides, GPT-2) and saves
them in float32; llmcc exports each folder in every quantization with a small GPT-2-style
tokenizer made here. gguf.GGUFReader then reads every file, and the test checks, against what
llama.cpp's converter (convert_hf_to_gguf.py) and quantizer (llama-quantize) make of the same
folder:

* the metadata: the architecture's keys, the tokenizer (tokens in GPT-2's byte alphabet, merges
  in rank order, token types, [PAD] tokens up to the model's rows, special ids);
* the tensors: llama.cpp's names, shapes in ggml's order, each tensor's type as llama-quantize
  chooses it;
* the values: gguf's own dequantizer on llmcc's bytes against the transformers weights in
  llama.cpp's layout (Llama's q and k rows permuted to adjacent rotary pairs, GPT-2's Conv1D
  weights transposed): f32 exact; f16 and bf16 the weights rounded to nearest even; q8_0, q4_0
  and q5_0 within half a step of each block's grid (a whole step on the side the grid clamps),
  and no worse than gguf's own quantizer; q4_K and q6_K within their sub-block bounds.

Run by scripts/test_python.sh with LLMCC_BINARY set to the build's llmcc.
"""
import json
import os
import subprocess

import numpy as np
import pytest
import torch
import transformers
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader
from gguf.quants import dequantize, quantize

LLMCC = os.environ.get("LLMCC_BINARY", "")
pytestmark = pytest.mark.skipif(not os.access(LLMCC, os.X_OK),
                                reason="LLMCC_BINARY does not name the llmcc binary (scripts/test_python.sh sets it)")

QUANTS = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m"]
FILE_TYPE = {"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2, "q4_k_m": 15}
EXTRA = 40  # BPE tokens beyond the 256 bytes
EOT = 256 + EXTRA
VOCAB = 300  # model rows: three more than the tokenizer has


def gpt2_alphabet():
    """Byte -> GPT-2's printable code point (encoder.json's spelling)."""
    out, nxt = {}, 256
    for b in range(256):
        printable = 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255
        out[b] = b if printable else nxt
        nxt += 0 if printable else 1
    return out


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A GPT-2-style tokenizer: the 256 bytes, "ab", "abb", ... (merged from the one before and
    "b"), <|endoftext|>. Returns (its directory, the expected tokens, the expected merges)."""
    d = tmp_path_factory.mktemp("tokenizer")
    alphabet = gpt2_alphabet()
    tokens = [chr(alphabet[b]) for b in range(256)]
    merges = []
    for i in range(EXTRA):
        left = "a" + "b" * i
        tokens.append(left + "b")
        merges.append(f"{left} b")
    tokens.append("<|endoftext|>")
    (d / "encoder.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    (d / "vocab.bpe").write_text("#version: 0.2\n" + "".join(m + "\n" for m in merges))
    return str(d), tokens, merges


def llama_untied():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
        tie_word_embeddings=False))


def llama_tied_scaled():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=8, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=500000.0,
        tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 16}))


def qwen3_tied():
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=96, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=True))


def qwen3_narrow():
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=96, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=24, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=False))


def gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=256, n_layer=2, n_head=4, activation_function="gelu_new"))


MODELS = {"llama-untied": llama_untied, "llama-tied-llama3-rope": llama_tied_scaled, "qwen3-tied": qwen3_tied,
          "qwen3-narrow": qwen3_narrow, "gpt2": gpt2}


def llama_permute(w, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: Hugging Face's rotate-half rows of each head to
    adjacent rotary pairs (what llama.cpp's rope type 0 rotates)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def expected_tensors(model):
    """llama.cpp's name -> the float32 array it holds (numpy, row-major as ggml lays it out)."""
    cfg = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    out = {}
    if cfg.model_type == "gpt2":
        out["token_embd.weight"] = sd["transformer.wte.weight"]
        out["position_embd.weight"] = sd["transformer.wpe.weight"]
        for i in range(cfg.n_layer):
            p, b = f"transformer.h.{i}.", f"blk.{i}."
            for hf, gg in [("ln_1", "attn_norm"), ("ln_2", "ffn_norm")]:
                out[b + gg + ".weight"], out[b + gg + ".bias"] = sd[p + hf + ".weight"], sd[p + hf + ".bias"]
            for hf, gg in [("attn.c_attn", "attn_qkv"), ("attn.c_proj", "attn_output"), ("mlp.c_fc", "ffn_up"),
                           ("mlp.c_proj", "ffn_down")]:
                out[b + gg + ".weight"] = np.ascontiguousarray(sd[p + hf + ".weight"].T)  # Conv1D is (in, out)
                out[b + gg + ".bias"] = sd[p + hf + ".bias"]
        out["output_norm.weight"], out["output_norm.bias"] = sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]
        return out
    llama = cfg.model_type == "llama"
    out["token_embd.weight"] = sd["model.embed_tokens.weight"]
    out["output_norm.weight"] = sd["model.norm.weight"]
    if not cfg.tie_word_embeddings:
        out["output.weight"] = sd["lm_head.weight"]
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for i in range(cfg.num_hidden_layers):
        for hf, gg in names.items():
            key = f"model.layers.{i}.{hf}.weight"
            if key not in sd:
                continue
            w = sd[key]
            if llama and hf == "self_attn.q_proj":
                w = llama_permute(w, cfg.num_attention_heads)
            if llama and hf == "self_attn.k_proj":
                w = llama_permute(w, cfg.num_key_value_heads)
            out[f"blk.{i}.{gg}.weight"] = w
    rs = cfg.rope_parameters  # transformers 5: rope_theta and the scaling's fields
    if llama and rs.get("rope_type") == "llama3":
        # convert_hf_to_gguf.py's LlamaModel rope_freqs for llama3 scaling.
        hd = cfg.hidden_size // cfg.num_attention_heads
        freqs = 1.0 / (rs["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
        old = rs["original_max_position_embeddings"]
        low_wl, high_wl = old / rs["low_freq_factor"], old / rs["high_freq_factor"]
        f = []
        for freq in freqs:
            wl = 2 * np.pi / freq
            if wl < high_wl:
                f.append(1.0)
            elif wl > low_wl:
                f.append(rs["factor"])
            else:
                smooth = (old / wl - rs["low_freq_factor"]) / (rs["high_freq_factor"] - rs["low_freq_factor"])
                f.append(1.0 / ((1 - smooth) / rs["factor"] + smooth))
        out["rope_freqs.weight"] = np.array(f, dtype=np.float32)
    return out


def more_bits(layer, n):
    return layer < n // 8 or layer >= 7 * n // 8 or (layer - n // 8) % 3 == 2


def expected_type(quant, name, arr, n_layer, has_output):
    """llama-quantize's choice (src/llama-quant.cpp) after convert_hf_to_gguf.py's."""
    if arr.ndim < 2 or name == "position_embd.weight":
        return Q.F32
    head = name == "output.weight" or (not has_output and name == "token_embd.weight")
    row = arr.shape[-1]
    t = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0}.get(quant)
    if quant == "q4_0":
        t = Q.Q6_K if head else Q.Q4_0
    if quant == "q4_k_m":
        layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
        if head:
            t = Q.Q6_K
        elif name.split(".")[-2] in ("attn_v", "attn_qkv", "ffn_down") and more_bits(layer, n_layer):
            t = Q.Q6_K
        else:
            t = Q.Q4_K
    fallback = {Q.Q4_K: Q.Q5_0, Q.Q6_K: Q.Q8_0}
    block = {Q.Q4_K: 256, Q.Q6_K: 256, Q.Q8_0: 32, Q.Q4_0: 32, Q.Q5_0: 32}
    while t in block and row % block[t] != 0:
        t = fallback.get(t, Q.F16)
    return t


def bf16_round(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def check_values(name, t, got, want):
    """got: gguf's dequantization of llmcc's bytes; want: the weights, both (rows, cols)."""
    if t == Q.F32:
        assert np.array_equal(got, want), name
        return
    if t == Q.F16:
        assert np.array_equal(got, want.astype(np.float16).astype(np.float32)), name
        return
    if t == Q.BF16:
        assert np.array_equal(got, bf16_round(want)), name
        return
    err = np.abs(got - want)
    if t in (Q.Q8_0, Q.Q4_0, Q.Q5_0):
        blocks = want.reshape(-1, 32)
        amax = np.abs(blocks).max(1, keepdims=True)
        step = {Q.Q8_0: 0.51 / 127, Q.Q4_0: 1.01 / 8, Q.Q5_0: 1.01 / 16}[t]
        assert np.all(err.reshape(-1, 32) <= amax * step + 1e-12), f"{name} {t.name}: worst {err.max()}"
        # No worse than gguf's own quantizer (llama.cpp's reference one) on the same values.
        ref = dequantize(quantize(want, t), t)
        ours, theirs = np.sqrt((err ** 2).mean()), np.sqrt(((ref - want) ** 2).mean())
        assert ours <= 1.05 * theirs + 1e-12, f"{name} {t.name}: rms error {ours} against gguf's {theirs}"
        return
    # K types: each sub-block within a step of its own range (6-bit scales included).
    sub, levels = (32, 15) if t == Q.Q4_K else (16, 63)
    w = want.reshape(-1, sub)
    rng = np.maximum(w.max(1, keepdims=True), 0) - np.minimum(w.min(1, keepdims=True), 0)
    amax = np.abs(want.reshape(-1, 256)).max(1).repeat(256 // sub)[:, None]
    assert np.all(err.reshape(-1, sub) <= rng / levels * 1.5 + amax * 2e-3), f"{name} {t.name}: worst {err.max()}"
    rel = np.sqrt((err ** 2).mean() / (want ** 2).mean())
    assert rel < (0.12 if t == Q.Q4_K else 0.03), f"{name} {t.name}: rms error {rel} of the rms value"


def field(r, key):
    return r.fields[key].contents()


@pytest.mark.parametrize("kind", list(MODELS))
def test_every_quantization_reads_back_as_llama_cpp_expects(kind, tokenizer, tmp_path):
    tok_dir, tokens, merges = tokenizer
    torch.manual_seed(7)
    model = MODELS[kind]().eval()
    folder = tmp_path / "hf"
    model.save_pretrained(folder)
    cfg = model.config
    want = expected_tensors(model)
    gpt2_arch = cfg.model_type == "gpt2"
    n_layer = cfg.n_layer if gpt2_arch else cfg.num_hidden_layers
    for quant in QUANTS:
        path = tmp_path / f"{quant}.gguf"
        r = subprocess.run([LLMCC, "export", "--ckpt", str(folder), "--format", "gguf", "--quant", quant,
                            "--tokenizer", f"gpt2:{tok_dir}", "--out", str(path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        g = GGUFReader(str(path))
        arch = field(g, "general.architecture")
        assert arch == {"gpt2": "gpt2", "llama": "llama", "qwen3": "qwen3"}[cfg.model_type]
        assert field(g, "general.file_type") == FILE_TYPE[quant]
        # The architecture's keys, as convert_hf_to_gguf.py writes them.
        if gpt2_arch:
            keys = {"context_length": cfg.n_positions, "embedding_length": cfg.n_embd, "block_count": cfg.n_layer,
                    "feed_forward_length": 4 * cfg.n_embd, "attention.head_count": cfg.n_head}
            assert field(g, "gpt2.attention.layer_norm_epsilon") == pytest.approx(cfg.layer_norm_epsilon)
        else:
            keys = {"context_length": cfg.max_position_embeddings, "embedding_length": cfg.hidden_size,
                    "block_count": cfg.num_hidden_layers, "feed_forward_length": cfg.intermediate_size,
                    "attention.head_count": cfg.num_attention_heads,
                    "attention.head_count_kv": cfg.num_key_value_heads}
            assert field(g, f"{arch}.attention.layer_norm_rms_epsilon") == pytest.approx(cfg.rms_norm_eps)
            assert field(g, f"{arch}.rope.freq_base") == pytest.approx(cfg.rope_parameters["rope_theta"])
            if arch == "qwen3":
                keys["attention.key_length"] = keys["attention.value_length"] = cfg.head_dim
            else:
                keys["rope.dimension_count"] = cfg.hidden_size // cfg.num_attention_heads
        for k, v in keys.items():
            assert field(g, f"{arch}.{k}") == v, k
        # The tokenizer, padded to the model's rows.
        assert field(g, "tokenizer.ggml.model") == "gpt2"
        assert field(g, "tokenizer.ggml.pre") == "gpt-2"
        assert field(g, "tokenizer.ggml.tokens") == tokens + [f"[PAD{i}]" for i in range(len(tokens), VOCAB)]
        assert field(g, "tokenizer.ggml.merges") == merges
        types = field(g, "tokenizer.ggml.token_type")
        assert types == [1] * EOT + [3] + [5] * (VOCAB - EOT - 1)
        assert field(g, "tokenizer.ggml.bos_token_id") == EOT and field(g, "tokenizer.ggml.eos_token_id") == EOT
        assert field(g, "tokenizer.ggml.add_bos_token") is False
        # Tensors: the names, shapes and types llama.cpp's tools would give, and the values.
        got = {t.name: t for t in g.tensors}
        assert set(got) == set(want), sorted(set(got) ^ set(want))
        has_output = "output.weight" in want
        for name, w in want.items():
            t = got[name]
            assert list(t.shape) == list(reversed(w.shape)), name
            assert t.tensor_type == expected_type(quant, name, w, n_layer, has_output), (name, quant, t.tensor_type)
            values = dequantize(t.data, t.tensor_type).reshape(w.shape).astype(np.float32)
            check_values(name, t.tensor_type, values, w)


def test_bad_requests_are_refused_and_leave_no_file(tokenizer, tmp_path):
    tok_dir, _, _ = tokenizer
    model = qwen3_narrow()
    model.save_pretrained(tmp_path / "hf")
    out = tmp_path / "m.gguf"
    r = subprocess.run([LLMCC, "export", "--ckpt", str(tmp_path / "hf"), "--format", "gguf", "--quant", "q4_k_s",
                        "--tokenizer", f"gpt2:{tok_dir}", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode != 0 and "--quant must be f32, f16, bf16, q8_0, q4_0, q4_k_m" in r.stderr, r.stderr
    assert not out.exists()
    # A tokenizer of 297 tokens for a model that reads 200.
    model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=200, hidden_size=96, intermediate_size=160, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=24))
    model.save_pretrained(tmp_path / "hf200")
    r = subprocess.run([LLMCC, "export", "--ckpt", str(tmp_path / "hf200"), "--format", "gguf",
                        "--tokenizer", f"gpt2:{tok_dir}", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode != 0 and "297" in r.stderr and "200" in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.parametrize("name,pre", [("gpt2", "gpt-2"), ("llama3-style", "llama-bpe"), ("qwen2-style", "qwen2")])
def test_a_tokenizer_json_travels_with_its_pre_tokenizer_specials_and_chat_template(name, pre, tmp_path):
    """tokenizer.json (the `tokenizers` library's files, as test_hf_tokenizers.py makes them): the
    vocabulary by id, the merges in rank order, special tokens as control tokens and other added
    ones as user-defined, the regex it splits with as llama.cpp's pre-tokenizer name, and
    tokenizer_config.json's chat template."""
    import test_hf_tokenizers as th
    folder = tmp_path / "tok"
    folder.mkdir()
    tok = th.TOKENIZERS[name](str(folder))
    tok.save(str(folder / "tokenizer.json"))
    template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    with open(folder / "tokenizer_config.json", "w") as f:
        json.dump({"chat_template": template}, f)
    n = tok.get_vocab_size(with_added_tokens=True)
    model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=n + 5, hidden_size=96, intermediate_size=160, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=24))
    model.save_pretrained(tmp_path / "hf")
    out = tmp_path / "m.gguf"
    r = subprocess.run([LLMCC, "export", "--ckpt", str(tmp_path / "hf"), "--format", "gguf", "--tokenizer",
                        f"hf:{folder / 'tokenizer.json'}", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    g = GGUFReader(str(out))
    spec = json.loads(tok.to_str())
    assert field(g, "tokenizer.ggml.model") == "gpt2"
    assert field(g, "tokenizer.ggml.pre") == pre
    tokens = field(g, "tokenizer.ggml.tokens")
    assert tokens == [tok.id_to_token(i) for i in range(n)] + [f"[PAD{i}]" for i in range(n, n + 5)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    assert field(g, "tokenizer.ggml.merges") == merges
    types = field(g, "tokenizer.ggml.token_type")
    added = {a["id"]: a["special"] for a in spec["added_tokens"]}
    assert added and types == [(3 if added[i] else 4) if i in added else 1 for i in range(n)] + [5] * 5
    assert field(g, "tokenizer.chat_template") == template


def test_a_sentencepiece_style_tokenizer_json_is_refused_by_name(tmp_path):
    import test_hf_tokenizers as th
    folder = tmp_path / "tok"
    folder.mkdir()
    tok = th.TOKENIZERS["sentencepiece-style"](str(folder))
    tok.save(str(folder / "tokenizer.json"))
    qwen3_narrow().save_pretrained(tmp_path / "hf")
    out = tmp_path / "m.gguf"
    r = subprocess.run([LLMCC, "export", "--ckpt", str(tmp_path / "hf"), "--format", "gguf", "--tokenizer",
                        f"hf:{folder / 'tokenizer.json'}", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode != 0 and "Metaspace" in r.stderr and "tokenizer.json" in r.stderr, r.stderr
    assert not out.exists()
