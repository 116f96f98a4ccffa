"""The blocks whose backward adgen generated, against pure-PyTorch blocks with the same weights:
outputs and the gradients of the input and of every parameter; then a nanoGPT-style GPT-2 whose
blocks are llmcc_torch.Gpt2Block against the same model with PyTorch's blocks: loss and every
gradient. All in float32 on both sides; tolerance |a - b| <= 1e-4 * (1 + |b|) unless noted, from
float32 rounding in different summation orders."""
import copy

import pytest
import torch

import llmcc_torch
import reference as ref


def close(a, b, what, tol=1e-4):
    torch.testing.assert_close(a, b, atol=tol, rtol=tol, msg=lambda m: f"{what}: {m}")


def compare_blocks(ours, theirs, x, tol=1e-4):
    missing = theirs.load_state_dict(ours.state_dict())
    assert not missing.missing_keys and not missing.unexpected_keys
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya, yb = ours(xa), theirs(xb)
    close(ya, yb, "output", tol)
    g = torch.randn_like(ya)
    (ya * g).sum().backward()
    (yb * g).sum().backward()
    close(xa.grad, xb.grad, "input gradient", tol)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(p.grad, theirs_params[name].grad, f"gradient of {name}", tol)


@pytest.mark.parametrize("B,T,C,n_head", [(2, 13, 48, 4), (1, 64, 96, 6), (3, 7, 32, 1)])
def test_gpt2_block_matches_pytorch_block(threads, B, T, C, n_head):
    ours = llmcc_torch.Gpt2Block(C, n_head)
    with torch.no_grad():  # non-trivial layernorm affine parameters and biases
        for name, p in ours.named_parameters():
            if "ln" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    compare_blocks(ours, ref.Block(C, n_head), torch.randn(B, T, C))


@pytest.mark.parametrize("B,T,dim,n_head,n_kv_head,hidden", [(2, 11, 64, 4, 2, 96), (1, 33, 48, 6, 6, 80),
                                                             (2, 5, 32, 4, 1, 50)])
def test_llama_block_matches_pytorch_block(threads, B, T, dim, n_head, n_kv_head, hidden):
    ours = llmcc_torch.LlamaBlock(dim, n_head, n_kv_head, hidden, eps=1e-5, rope_theta=10000.0)
    with torch.no_grad():
        for name, p in ours.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    compare_blocks(ours, ref.LlamaBlock(dim, n_head, n_kv_head, hidden, 1e-5, 10000.0), torch.randn(B, T, dim))


def tiny_gpt_pair(loss_fn=None):
    cfg = ref.GptConfig(vocab_size=97, block_size=32, n_layer=3, n_head=4, n_embd=64)
    theirs = ref.Gpt(cfg)
    ours = ref.Gpt(cfg, block=llmcc_torch.Gpt2Block, loss_fn=loss_fn)
    missing = ours.load_state_dict(theirs.state_dict())
    assert not missing.missing_keys and not missing.unexpected_keys
    return ours, theirs


def test_nanogpt_with_llmcc_blocks_gives_pytorchs_loss_and_gradients(threads):
    ours, theirs = tiny_gpt_pair()
    idx = torch.randint(0, 97, (4, 29))
    targets = torch.randint(0, 97, (4, 29))
    loss_a, loss_b = ours(idx, targets), theirs(idx, targets)
    close(loss_a, loss_b, "loss", 1e-5)
    loss_a.backward()
    loss_b.backward()
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(p.grad, grads[name].grad, f"gradient of {name}")


def test_nanogpt_trains_the_same_with_llmcc_blocks_and_ops():
    """Ten AdamW steps: llmcc blocks + llmcc's fused cross-entropy against pure PyTorch. Every
    step's loss and the final weights agree, except attn.c_attn.bias: its key third has a true
    gradient of zero (softmax ignores a shift shared by all keys), so AdamW turns each side's
    rounding noise into steps of up to lr; it changes no output."""
    ours, theirs = tiny_gpt_pair(loss_fn=lambda logits, y: llmcc_torch.cross_entropy(logits, y))
    opt_a = torch.optim.AdamW(ours.parameters(), lr=1e-3)
    opt_b = torch.optim.AdamW(theirs.parameters(), lr=1e-3)
    data = torch.randint(0, 97, (10, 2, 4, 17))
    for step in range(10):
        losses = []
        for model, opt in ((ours, opt_a), (theirs, opt_b)):
            opt.zero_grad()
            loss = model(data[step, 0], data[step, 1])
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        close(losses[0], losses[1], f"loss of step {step}", 1e-5)
    params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        if not name.endswith("c_attn.bias"):
            close(p, params[name], f"{name} after 10 steps", 1e-4)


def test_block_without_grad_and_with_frozen_parameters():
    block = llmcc_torch.Gpt2Block(32, 4)
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        y0 = block(x)
    for p in block.parameters():
        p.requires_grad_(False)
    xg = x.clone().requires_grad_(True)
    y1 = block(xg)
    y1.sum().backward()
    close(y1.detach(), y0, "output", 0)
    assert xg.grad is not None and all(p.grad is None for p in block.parameters())


def test_a_second_backward_through_a_block_is_refused():
    block = llmcc_torch.Gpt2Block(32, 4)
    y = block(torch.randn(1, 4, 32, requires_grad=True)).sum()
    y.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="used by an earlier backward"):
        y.backward()


def test_blocks_copy_and_state_dict_names():
    block = llmcc_torch.Gpt2Block(32, 4)
    assert list(block.state_dict()) == list(ref.Block(32, 4).state_dict())
    clone = copy.deepcopy(block)
    x = torch.randn(1, 3, 32)
    close(clone(x), block(x), "deep copy", 0)
    llama = llmcc_torch.LlamaBlock(32, 4, 2, 48)
    assert sorted(llama.state_dict()) == sorted(ref.LlamaBlock(32, 4, 2, 48).state_dict())
