"""llmcc_torch.AdamW against torch.optim.AdamW: the same parameters and moments after several
steps (to 1e-6 relative: the same float arithmetic, up to fused multiply-adds), parameter groups
with and without weight decay, parameters without a gradient in a step, state_dicts that move
between the two, and bad input."""
import copy

import pytest
import torch

import llmcc_torch


def close(a, b, what):
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=lambda m: f"{what}: {m}")


def make_params(seed):
    g = torch.Generator().manual_seed(seed)
    shapes = [(7, 5), (33,), (3, 4, 70001 // 12), (1,)]
    return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]


def groups(params):
    return [dict(params=params[:2], weight_decay=0.1), dict(params=params[2:], weight_decay=0.0, lr=3e-3)]


def test_adamw_matches_torch(threads):
    ours_p, theirs_p = make_params(1), make_params(1)
    ours = llmcc_torch.AdamW(groups(ours_p), lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    theirs = torch.optim.AdamW(groups(theirs_p), lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(2)
    for step in range(6):
        for i, (a, b) in enumerate(zip(ours_p, theirs_p)):
            if step == 3 and i == 1:  # no gradient this step: left alone by both
                a.grad = b.grad = None
                continue
            grad = torch.randn(a.shape, generator=g)
            a.grad, b.grad = grad.clone(), grad.clone()
        ours.step()
        theirs.step()
        for i, (a, b) in enumerate(zip(ours_p, theirs_p)):
            close(a, b, f"parameter {i} after step {step + 1}")
            close(ours.state[a]["exp_avg"], theirs.state[b]["exp_avg"], f"exp_avg {i}")
            close(ours.state[a]["exp_avg_sq"], theirs.state[b]["exp_avg_sq"], f"exp_avg_sq {i}")
            assert ours.state[a]["step"].item() == theirs.state[b]["step"].item()


def test_state_dicts_move_between_llmcc_and_torch():
    ours_p, theirs_p = make_params(3), make_params(3)
    ours = llmcc_torch.AdamW(groups(ours_p))
    for p in ours_p:
        p.grad = torch.ones_like(p)
    ours.step()
    theirs = torch.optim.AdamW(groups(theirs_p))
    with torch.no_grad():
        for a, b in zip(ours_p, theirs_p):
            b.copy_(a)
    theirs.load_state_dict(copy.deepcopy(ours.state_dict()))  # loading keeps matching tensors: no sharing
    for p, q in zip(ours_p, theirs_p):
        p.grad = q.grad = torch.full_like(p, -0.5)
    ours.step()
    theirs.step()
    for i, (a, b) in enumerate(zip(ours_p, theirs_p)):
        close(a, b, f"parameter {i} after a step from the loaded state")


def test_adamw_rejects_bad_input():
    with pytest.raises(ValueError, match=r"\[AdamW\] invalid hyperparameters"):
        llmcc_torch.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=-1.0)
    p = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    p.grad = torch.ones(3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"\[AdamW\] the parameter of parameter 0 must be a dense contiguous CPU "
                       r"float32 tensor"):
        llmcc_torch.AdamW([p]).step()
