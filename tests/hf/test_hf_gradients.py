"""llmcc's generated gradients against transformers' autograd, at sizes drawn at random.

The parity tests (tests/models/test_*_parity.cpp) hold one small configuration per family. Here
each run draws new ones: for GPT-2, Llama and Qwen3, one configuration whose batch has at most
512 rows (B * T) and one with more, so both of the GEMM's orders run, with heads of 8 to 128
channels, grouped key/value heads, SwiGLU widths that are multiples of nothing in particular,
sequences past the attention kernels' 64-row blocks, vocabularies on both sides of the GEMM's
4,096-column blocks, tied and untied heads and llama3 rope scaling. transformers builds each model
(weights drawn so that every path carries signal) and saves it as a folder in f32;
`llmcc_gradient_dump` (tests/hf/gradient_dump.cpp) loads it through llmcc's Hugging Face reader,
computes the mean cross-entropy's gradient on a batch with about one target in ten ignored, and
writes it in the family's layout; transformers computes the same gradient in float64 from the
same f32 weights. Every tensor's max abs difference, relative to that tensor's max magnitude,
must be at most TOLERANCE with fp32 products (each configuration on 2 threads, with and without
activation checkpointing, whose generated backward runs each block's forward again; the smaller
batch on one thread too) or
BF16_TOLERANCE with bf16 products (the configurations of at most 512 rows), and the loss must
agree as closely. Over 30 seeds (270 configurations, LoRA's below included) the worst tensors
were at 1.2e-5 in fp32 and 4.9e-2 in bf16 (the query and key maps, their norms and the adapters
on them, where bf16's rounding of the operands moves the gradient most); a wrong term in a
backward moves a tensor by far more.

The tool also runs each model's KV-cache generator over the batch's first row (a prefill of half
of it, then one step per token): its logits must match the reference forward's at those
positions within TOLERANCE of the largest (at most 6.7e-6 over 8 seeds), so generation is held
to transformers (and PEFT) at the same random sizes.

LoRA adapters of a random rank (1 to 32), alpha and set of maps over a base drawn the same way
get the same check against PEFT (peft.get_peft_model on transformers' model): the tool loads the
PEFT adapter directory and writes the adapters' gradient in PEFT's layout. With the base's
matrices stored in bf16 (llmcc's --base-dtype bf16, the GEMM reading them as bf16) the reference
is PEFT's on the base rounded to bf16, so fp32 products keep fp32's tolerance. The adapters' updates are
drawn at about 0.3 of each map's output: adapters that dominate the base make the gradient so
sensitive to rounding that bf16 products (llmcc's, or PyTorch's emulated in float64) move it by
more than its size.

The sizes come from LLMCC_GRADIENT_SEED, else from a seed drawn per run; a failure names the seed
and the configuration, so `LLMCC_GRADIENT_SEED=<seed> scripts/test_python.sh -k gradients`
repeats it. Run by scripts/test_python.sh with LLMCC_GRADIENT_DUMP set to the build's tool.
"""
import math
import os
import random
import struct
import subprocess

import pytest
import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file

TOOL = os.environ.get("LLMCC_GRADIENT_DUMP", "")
SEED = int(os.environ.get("LLMCC_GRADIENT_SEED", "0")) or random.SystemRandom().randrange(1, 1 << 31)
TOLERANCE = 2e-4
BF16_TOLERANCE = 2e-1
# A tensor's scale is at least this fraction of the largest gradient magnitude in the model: a
# gradient that is zero in exact arithmetic (GPT-2's key bias) is rounding noise in both.
FLOOR = 1e-5
# The GEMM's built-in blocking, as in every C++ test (cmake/Tests.cmake): no test measures one on a
# loaded machine and writes it into the user's cache.
TOOL_ENV = {**os.environ, "LLMCC_GEMM_TUNE": "off"}
STREAM_ROWS = 512  # the GEMM's streaming order takes products of at most this many rows

pytestmark = pytest.mark.skipif(not os.access(TOOL, os.X_OK),
                                reason="LLMCC_GRADIENT_DUMP does not name llmcc_gradient_dump "
                                       "(scripts/test_python.sh sets it)")


def draw_batch_shape(rng, large):
    """B and T with B * T at most STREAM_ROWS, or above it."""
    B = rng.choice([1, 2, 3])
    if large:
        T = rng.randint(STREAM_ROWS // B + 1, STREAM_ROWS // B + 160)
    else:
        T = rng.randint(33, min(200, STREAM_ROWS // B))
    return B, T


def draw_config(family, rng, T):
    V = rng.randint(257, 6000)
    L = rng.choice([1, 2])
    if family == "gpt2":
        NH = rng.randint(1, 6)
        HS = rng.choice([8, 16, 24, 40, 64, 72])
        return transformers.GPT2Config(
            vocab_size=V, n_positions=T + rng.choice([0, 7]), n_embd=NH * HS, n_layer=L, n_head=NH,
            activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    NKV = rng.randint(1, 4)
    NH = NKV * rng.choice([1, 2, 3])
    HS = rng.choice([8, 16, 32, 48, 64, 128])
    if family == "llama":
        while NH * HS > 768:  # at most GPT-2 124M's width, so that a run stays within seconds
            HS //= 2
        C = NH * HS
        scaling = None
        if rng.random() < 0.5:
            scaling = {"rope_type": "llama3", "factor": rng.choice([2.0, 8.0]), "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": rng.choice([16, 64])}
        return transformers.LlamaConfig(
            vocab_size=V, hidden_size=C, intermediate_size=rng.randint(C, 3 * C + 1), num_hidden_layers=L,
            num_attention_heads=NH, num_key_value_heads=NKV, max_position_embeddings=T + rng.choice([0, 5]),
            rms_norm_eps=rng.choice([1e-5, 1e-6]), rope_theta=rng.choice([10000.0, 500000.0]),
            tie_word_embeddings=rng.random() < 0.5, rope_scaling=scaling)
    C = rng.choice([2, 4, 6, 8]) * rng.randint(4, 64)  # independent of the heads
    return transformers.Qwen3Config(
        vocab_size=V, hidden_size=C, intermediate_size=rng.randint(C // 2, 3 * C + 1), num_hidden_layers=L,
        num_attention_heads=NH, num_key_value_heads=NKV, head_dim=HS, max_position_embeddings=T + rng.choice([0, 3]),
        rms_norm_eps=rng.choice([1e-6, 1e-5]), rope_theta=rng.choice([10000.0, 1000000.0]),
        tie_word_embeddings=rng.random() < 0.5)


MODEL_CLASS = {"gpt2": transformers.GPT2LMHeadModel, "llama": transformers.LlamaForCausalLM,
               "qwen3": transformers.Qwen3ForCausalLM}


def init_weights(model, gen):
    """Activations and logits of order one: matrices N(0, 1/fan_in), norm gains 1 + N(0, 0.1),
    biases N(0, 0.1)."""
    conv1d = transformers.pytorch_utils.Conv1D
    with torch.no_grad():
        for module in model.modules():
            for name, p in module.named_parameters(recurse=False):
                if p.dim() == 2:
                    fan_in = p.shape[0] if isinstance(module, conv1d) else p.shape[1]
                    p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
                elif name == "weight":  # a norm's gain
                    p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
                else:
                    p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def reference(model, idx, targets):
    """transformers' loss, gradient by parameter name and the first row's logits (T, V), in float64
    from the f32 weights."""
    model = model.double()
    logits = model(torch.tensor(idx)).logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.tensor(targets).reshape(-1), ignore_index=-1)
    loss.backward()
    return float(loss.detach()), {n: p.grad.detach().clone() for n, p in model.named_parameters()}, \
        logits[0].detach()


def deviations(got, ref):
    """Each tensor's max |got - ref| over its own max |ref| (floored), worst first."""
    top = max(float(g.abs().max()) for g in ref.values())
    out = []
    for name, r in ref.items():
        g = got[name].double()
        assert g.shape == r.shape, f"{name}: llmcc's gradient {tuple(g.shape)}, the reference's {tuple(r.shape)}"
        scale = max(float(r.abs().max()), FLOOR * top)
        out.append((float((g - r).abs().max()) / scale, name))
    return sorted(out, reverse=True)


def write_batch(rng, V, B, T, path):
    """Token ids (B, T) and targets with about one in ten ignored (-1), written as the tool reads
    them (int32: B, T, ids, targets)."""
    idx = [[rng.randrange(V) for _ in range(T)] for _ in range(B)]
    targets = [[-1 if rng.random() < 0.1 else rng.randrange(V) for _ in range(T)] for _ in range(B)]
    flat = [v for row in idx for v in row] + [v for row in targets for v in row]
    path.write_bytes(struct.pack(f"<{2 + len(flat)}i", B, T, *flat))
    return idx, targets, path


def llmcc_gradient(model, batch, out, what, dtype, threads, checkpoint, *extra):
    """Runs llmcc_gradient_dump; returns the loss it printed."""
    result = subprocess.run([TOOL, str(model), str(batch), str(out), "--threads", str(threads), "--dtype", dtype,
                             "--checkpoint-activations", checkpoint, *extra], capture_output=True, text=True,
                            env=TOOL_ENV)
    assert result.returncode == 0, f"{what}\nllmcc_gradient_dump failed:\n{result.stdout}\n{result.stderr}"
    return float(result.stdout.split()[1])


def expect_decode_logits(path, ref_logits, V, what):
    """The tool's --decode-logits file (a prefill of the first row's first T / 2 tokens, then a
    step per token) against rows P - 1 .. T - 1 of the reference forward's logits (T, V)."""
    T = ref_logits.shape[0]
    P = max(1, T // 2)
    got = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.float32).double()
    assert got.numel() == (T - P + 1) * V, f"{what}: {got.numel()} decoded logits, expected {(T - P + 1) * V}"
    want = ref_logits[P - 1:, :V]
    error = float((got.reshape(want.shape) - want).abs().max() / want.abs().max())
    assert error <= TOLERANCE, f"{what}: KV-cache decoding's logits off by {error} of the largest"


def expect_close(loss, got, ref_loss, ref, dtype, what):
    tolerance = BF16_TOLERANCE if dtype == "bf16" else TOLERANCE
    assert abs(loss - ref_loss) <= tolerance * max(1.0, abs(ref_loss)), f"{what}: loss {loss}, reference {ref_loss}"
    worst = deviations(got, ref)
    assert worst[0][0] <= tolerance, f"{what}: worst gradients (relative error, tensor): {worst[:5]}"


SHAPE_KEYS = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "hidden_size", "intermediate_size",
              "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
              "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters",
              "tie_word_embeddings")
CASES = [(family, large) for family in ("gpt2", "llama", "qwen3") for large in (False, True)]


@pytest.mark.parametrize("family,large", CASES, ids=[f"{f}-{'over' if big else 'upto'}{STREAM_ROWS}rows"
                                                     for f, big in CASES])
def test_gradient_matches_transformers_at_random_sizes(family, large, tmp_path):
    rng = random.Random(f"{SEED}-{family}-{large}")
    B, T = draw_batch_shape(rng, large)
    config = draw_config(family, rng, T)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 62))
    model = MODEL_CLASS[family](config).float()
    init_weights(model, gen)
    folder = tmp_path / "model"
    model.save_pretrained(folder)

    V = config.vocab_size
    idx, targets, batch = write_batch(rng, V, B, T, tmp_path / "batch.bin")

    ref_loss, ref, ref_logits = reference(model, idx, targets)
    shape = {k: v for k, v in config.to_dict().items() if k in SHAPE_KEYS and v is not None}
    what = f"LLMCC_GRADIENT_SEED={SEED}: {family} B={B} T={T} {shape}"

    # Every configuration on 2 threads in fp32, also with activation checkpointing (adgen's other
    # backward, which runs each block's forward again); the batch of at most 512 rows also on one
    # thread and with bf16 products. The fast kernels only: the reference kernels take seconds at
    # these sizes, and the op tests hold each fast kernel to its reference kernel.
    modes = [("fp32", 2, "off"), ("fp32", 2, "on")] + ([("fp32", 1, "off"), ("bf16", 2, "off")] if not large else [])
    for dtype, threads, checkpoint in modes:
        out = tmp_path / f"grad-{dtype}-{threads}-{checkpoint}"
        mode = f"{what}\n{dtype} products, {threads} threads, activation checkpointing {checkpoint}"
        decode = dtype == "fp32" and threads == 2 and checkpoint == "off"
        extra = ["--decode-logits", str(out) + ".logits"] if decode else []
        loss = llmcc_gradient(folder, batch, out, what, dtype, threads, checkpoint, *extra)
        got = load_file(out / "model.safetensors")
        missing = sorted(set(ref) - set(got))
        assert not missing, f"{what}\nllmcc wrote no gradient for {missing}"
        expect_close(loss, got, ref_loss, ref, dtype, mode)
        if decode:
            expect_decode_logits(str(out) + ".logits", ref_logits, config.vocab_size, mode)


def peft_gradient(lora, idx, targets):
    """PEFT's loss, the adapters' gradient by the names of its adapter files (its parameters' names
    carry the adapter's name, "lora_A.default.weight"; the files do not) and the first row's
    logits (T, V)."""
    lora.zero_grad()
    logits = lora(torch.tensor(idx)).logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.tensor(targets).reshape(-1), ignore_index=-1)
    loss.backward()
    return float(loss.detach()), {n.replace(".default.", "."): p.grad.detach().clone()
                                  for n, p in lora.named_parameters() if p.requires_grad}, logits[0].detach()


LORA_MODULES = {"gpt2": ["c_attn", "c_proj", "c_fc"],
                "llama": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
LORA_MODULES["qwen3"] = LORA_MODULES["llama"]


@pytest.mark.parametrize("family", ("gpt2", "llama", "qwen3"))
def test_lora_gradient_matches_peft_at_random_sizes(family, tmp_path):
    """LoRA adapters of a random rank, alpha and set of maps over a base of random sizes: the
    adapters' gradient against PEFT's (peft.get_peft_model on transformers' model, float64)."""
    peft = pytest.importorskip("peft")
    rng = random.Random(f"{SEED}-{family}-lora")
    B, T = draw_batch_shape(rng, rng.random() < 0.5)
    config = draw_config(family, rng, T)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 62))
    base = tmp_path / "base"
    model = MODEL_CLASS[family](config).float()
    init_weights(model, gen)
    model.save_pretrained(base)
    # Loaded back, so that the adapter's base_model_name_or_path names the folder llmcc reads.
    model = MODEL_CLASS[family].from_pretrained(base, dtype=torch.float32)
    modules = [m for m in LORA_MODULES[family] if rng.random() < 0.6] or [rng.choice(LORA_MODULES[family])]
    rank = rng.choice([1, 2, 3, 4, 8, 13, 16, 32])
    alpha = rng.choice([1.0, 8.0, 16.0, 32.0])
    lora = peft.get_peft_model(model, peft.LoraConfig(r=rank, lora_alpha=alpha, target_modules=modules,
                                                      lora_dropout=0.0, fan_in_fan_out=family == "gpt2",
                                                      init_lora_weights=False))
    # A ~ N(0, 1/fan_in) and B ~ N(0, 0.3 sqrt(rank) / alpha): each map's update (alpha / rank) B A x
    # about 0.3 of its base's output, whatever the rank and alpha.
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if ".lora_A." in name:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
            elif ".lora_B." in name:
                p.copy_(0.3 * math.sqrt(rank) / alpha * torch.randn(p.shape, generator=gen))
    adapter = tmp_path / "adapter"
    lora.save_pretrained(adapter)

    V = config.vocab_size
    idx, targets, batch = write_batch(rng, V, B, T, tmp_path / "batch.bin")
    lora = lora.double()
    ref_loss, ref, ref_logits = peft_gradient(lora, idx, targets)
    # With the base's matrices stored in bf16 (llmcc's --base-dtype bf16) the adapters train over
    # those values: the same reference on a base rounded to bf16, for fp32's tolerance.
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if not p.requires_grad and p.dim() == 2:
                p.copy_(p.to(torch.bfloat16).double())
    rounded_loss, rounded, rounded_logits = peft_gradient(lora, idx, targets)
    shape = {k: v for k, v in config.to_dict().items() if k in SHAPE_KEYS and v is not None}
    what = (f"LLMCC_GRADIENT_SEED={SEED}: {family} B={B} T={T} {shape}, LoRA rank {rank} alpha {alpha} on "
            f"{modules}")

    for dtype, threads, checkpoint, base_dtype in [("fp32", 1, "off", "f32"), ("fp32", 2, "off", "f32"),
                                                   ("fp32", 2, "on", "f32"), ("bf16", 2, "off", "f32"),
                                                   ("fp32", 2, "off", "bf16"), ("bf16", 2, "off", "bf16")]:
        out = tmp_path / f"grad-{dtype}-{threads}-{checkpoint}-{base_dtype}"
        mode = (f"{what}\n{dtype} products, {threads} threads, activation checkpointing {checkpoint}, "
                f"base in {base_dtype}")
        decode = dtype == "fp32" and threads == 2 and checkpoint == "off"
        extra = ["--decode-logits", str(out) + ".logits"] if decode else []
        loss = llmcc_gradient(adapter, batch, out, what, dtype, threads, checkpoint, "--base-dtype", base_dtype,
                              *extra)
        got = load_file(out / "adapter_model.safetensors")
        assert sorted(got) == sorted(ref), f"{what}\nllmcc's adapter tensors {sorted(got)}, PEFT's {sorted(ref)}"
        rounded_base = base_dtype == "bf16"
        expect_close(loss, got, rounded_loss if rounded_base else ref_loss, rounded if rounded_base else ref, dtype,
                     mode)
        if decode:
            expect_decode_logits(str(out) + ".logits", rounded_logits if rounded_base else ref_logits, V, mode)

