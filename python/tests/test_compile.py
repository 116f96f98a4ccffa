"""The operators under torch.compile (opaque calls in the compiled graph, traced with their fake
kernels, differentiated with their registered backward) and the blocks inside a compiled model
(a graph break around each block call). Compiled and eager results must agree to 1e-5."""
import torch

import llmcc_torch
import reference as ref


def close(a, b, what, tol=1e-5):
    torch.testing.assert_close(a, b, atol=tol, rtol=tol, msg=lambda m: f"{what}: {m}")


def layer(qkv, x, w, b, w2, targets):
    y = llmcc_torch.attention_qkv(qkv, 4, 2)  # (B, T, 4 * 8)
    h = llmcc_torch.layernorm(y + x, w, b)
    h = llmcc_torch.gelu(h) + llmcc_torch.silu(h)
    h = llmcc_torch.rmsnorm(llmcc_torch.rope(h, 4, 10000.0, 0), w2, 1e-5)
    return llmcc_torch.cross_entropy(h, targets)


def test_ops_in_a_compiled_function_match_eager():
    torch._dynamo.reset()
    inputs = [torch.randn(2, 9, 64), torch.randn(2, 9, 32), torch.randn(32), torch.randn(32), torch.randn(32)]
    targets = torch.randint(0, 32, (2, 9))
    compiled = torch.compile(layer, fullgraph=True)  # fullgraph: no graph break, every op traced
    results = []
    for fn in (layer, compiled):
        xs = [t.clone().requires_grad_(True) for t in inputs]
        loss = fn(*xs, targets)
        loss.backward()
        results.append((loss.detach(), [x.grad for x in xs]))
    close(results[1][0], results[0][0], "loss")
    for i, (a, b) in enumerate(zip(results[1][1], results[0][1])):
        close(a, b, f"gradient of input {i}")


def test_compiled_model_with_llmcc_blocks_matches_eager():
    torch._dynamo.reset()
    cfg = ref.GptConfig(vocab_size=61, block_size=16, n_layer=2, n_head=2, n_embd=32)
    model = ref.Gpt(cfg, block=llmcc_torch.Gpt2Block)
    compiled = torch.compile(model)
    idx, targets = torch.randint(0, 61, (2, 12)), torch.randint(0, 61, (2, 12))
    loss = model(idx, targets)
    loss.backward()
    eager = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    loss_c = compiled(idx, targets)
    loss_c.backward()
    close(loss_c, loss, "loss")
    for n, p in model.named_parameters():
        close(p.grad, eager[n], f"gradient of {n}")
