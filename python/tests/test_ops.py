"""Every op against PyTorch's own implementation of the same math, forward and every gradient.

The reference runs in float64 on the same (float32-representable) inputs, so what is measured is
llmcc's float32 error. Tolerances, |llmcc - reference| <= ATOL + RTOL * |reference| elementwise:
  forward outputs and gradients of the elementwise and norm ops: RTOL 1e-4, ATOL 1e-5
  attention (sums over T keys), linear (over C) and cross-entropy: RTOL 1e-4, ATOL 2e-5
Sizes are odd on purpose (T not a multiple of any block, head sizes 8 to 40, GQA groups).
"""
import pytest
import torch
import torch.nn.functional as F

import llmcc_torch
import reference as ref

RTOL, ATOL = 1e-4, 1e-5
ATT_ATOL = 2e-5


def close(actual, expected, what, atol=ATOL, rtol=RTOL):
    torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}")


def run_both(fn_llmcc, fn_ref, inputs, atol=ATOL, rtol=RTOL, upstream=None):
    """Forward of both; then the gradient of sum(out * g) for a random g, wrt every float input."""
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    rs = [x.detach().double().requires_grad_(True) if x.is_floating_point() else x for x in inputs]
    out = fn_llmcc(*xs)
    out_ref = fn_ref(*rs)
    close(out, out_ref, "forward", atol, rtol)
    g = torch.randn_like(out) if upstream is None else upstream
    (out * g).sum().backward()
    (out_ref * g.double()).sum().backward()
    for i, (x, r) in enumerate(zip(xs, rs)):
        if x.is_floating_point():
            close(x.grad, r.grad, f"gradient of input {i}", atol, rtol)


@pytest.mark.parametrize("B,T,n_head,n_kv_head,hs", [(2, 17, 4, 4, 8), (1, 33, 6, 2, 16), (3, 5, 3, 1, 40),
                                                      (2, 64, 12, 12, 24)])
def test_attention_matches_sdpa(threads, B, T, n_head, n_kv_head, hs):
    q = torch.randn(B, T, n_head * hs)
    k = torch.randn(B, T, n_kv_head * hs)
    v = torch.randn(B, T, n_kv_head * hs)
    run_both(lambda q, k, v: llmcc_torch.attention(q, k, v, n_head, n_kv_head),
             lambda q, k, v: ref.attention(q, k, v, n_head, n_kv_head), [q, k, v], atol=ATT_ATOL)


@pytest.mark.parametrize("B,T,n_head,n_kv_head,hs", [(2, 19, 4, 4, 16), (1, 40, 8, 2, 8), (2, 3, 2, 1, 32)])
def test_attention_qkv_matches_sdpa(threads, B, T, n_head, n_kv_head, hs):
    qkv = torch.randn(B, T, (n_head + 2 * n_kv_head) * hs)
    run_both(lambda t: llmcc_torch.attention_qkv(t, n_head, n_kv_head),
             lambda t: ref.attention(*ref.split_qkv(t, n_head, n_kv_head), n_head, n_kv_head), [qkv], atol=ATT_ATOL)


@pytest.mark.parametrize("x_shape,OC,bias", [((7, 33), 5, True), ((2, 9, 64), 97, False), ((3, 5, 48), 130, True)])
def test_linear_matches_torch(threads, x_shape, OC, bias):
    C = x_shape[-1]
    inputs = [torch.randn(x_shape), torch.randn(OC, C)] + ([torch.randn(OC)] if bias else [])
    run_both(llmcc_torch.linear, F.linear, inputs, atol=ATT_ATOL)


@pytest.mark.parametrize("shape", [(7, 33), (2, 9, 64), (3, 5, 768)])
def test_layernorm_matches_torch(threads, shape):
    C = shape[-1]
    run_both(llmcc_torch.layernorm, lambda x, w, b: F.layer_norm(x, (C,), w, b, eps=1e-5),
             [torch.randn(shape) * 3 + 1, torch.randn(C), torch.randn(C)])


@pytest.mark.parametrize("shape,eps", [((7, 33), 1e-5), ((2, 9, 64), 1e-6), ((3, 5, 288), 1e-5)])
def test_rmsnorm_matches_torch(threads, shape, eps):
    C = shape[-1]
    run_both(lambda x, w: llmcc_torch.rmsnorm(x, w, eps), lambda x, w: F.rms_norm(x, (C,), w, eps=eps),
             [torch.randn(shape) * 2, torch.randn(C)])


@pytest.mark.parametrize("shape", [(5,), (3, 37), (2, 7, 100), (2, 3, 4, 5)])
def test_gelu_matches_torch_tanh_gelu(threads, shape):
    run_both(llmcc_torch.gelu, lambda x: F.gelu(x, approximate="tanh"), [torch.randn(shape) * 3])


@pytest.mark.parametrize("shape", [(5,), (3, 37), (2, 7, 100), (2, 3, 4, 5)])
def test_silu_matches_torch(threads, shape):
    run_both(llmcc_torch.silu, F.silu, [torch.randn(shape) * 3])


@pytest.mark.parametrize("B,T,n_head,hs,theta,pos", [(2, 11, 4, 8, 10000.0, 0), (1, 30, 3, 16, 500000.0, 7),
                                                     (2, 5, 2, 64, 10000.0, 100)])
def test_rope_matches_meta_complex_rotation(threads, B, T, n_head, hs, theta, pos):
    run_both(lambda x: llmcc_torch.rope(x, n_head, theta, pos), lambda x: ref.rope(x, n_head, theta, pos),
             [torch.randn(B, T, n_head * hs)])


@pytest.mark.parametrize("shape,V,ignore", [((13, 50), 50, -100), ((2, 7, 64), 61, -1), ((3, 5, 1000), 1000, 0)])
def test_cross_entropy_matches_torch(threads, shape, V, ignore):
    logits = torch.randn(shape) * 4
    targets = torch.randint(0, V, shape[:-1])
    targets.view(-1)[::3] = ignore  # every third token ignored
    if ignore >= 0:  # an ignore_index that is also a class id: no other target may be it
        targets[targets == ignore] = -7
        targets.view(-1)[::3] = ignore
        targets[targets == -7] = V - 1
    targets_ref = targets

    def ref_fn(lg):
        return F.cross_entropy(lg[..., :V].reshape(-1, V), targets_ref.reshape(-1), ignore_index=ignore)

    run_both(lambda lg: llmcc_torch.cross_entropy(lg, targets, ignore_index=ignore, vocab_size=V), ref_fn, [logits],
             atol=ATT_ATOL, upstream=torch.tensor(1.7))


def test_cross_entropy_padded_columns_get_no_gradient():
    logits = torch.randn(6, 12, requires_grad=True)
    targets = torch.randint(0, 10, (6,))
    llmcc_torch.cross_entropy(logits, targets, vocab_size=10).backward()
    assert torch.all(logits.grad[:, 10:] == 0)


def test_cross_entropy_int32_targets_equal_int64():
    logits = torch.randn(4, 9, 30)
    t = torch.randint(0, 30, (4, 9))
    assert llmcc_torch.cross_entropy(logits, t).item() == llmcc_torch.cross_entropy(logits, t.int()).item()


def test_non_contiguous_inputs_give_the_contiguous_result():
    x = torch.randn(5, 40, 3).transpose(1, 2)  # (5, 3, 40), not contiguous
    w, b = torch.randn(40), torch.randn(40)
    close(llmcc_torch.layernorm(x, w, b), llmcc_torch.layernorm(x.contiguous(), w, b), "layernorm", 0, 0)
    qkv = torch.randn(2, 24, 9, 16)[:, :, :, :8].reshape(2, 24, 72)  # a copy already; and a strided one:
    strided = torch.randn(2, 72, 24).transpose(1, 2)
    close(llmcc_torch.attention_qkv(strided, 3), llmcc_torch.attention_qkv(strided.contiguous(), 3), "attention", 0, 0)
    close(llmcc_torch.attention_qkv(qkv, 3), llmcc_torch.attention_qkv(qkv.contiguous(), 3), "attention", 0, 0)
    g = torch.randn(4, 6).t()  # (6, 4), not contiguous
    up = torch.randn(4, 6).t()
    xs, xr = g.clone().requires_grad_(True), g.double().requires_grad_(True)
    llmcc_torch.gelu(xs).backward(up)  # a transposed upstream gradient
    F.gelu(xr, approximate="tanh").backward(up.double())
    close(xs.grad, xr.grad, "gelu gradient")


# ---- gradcheck -----------------------------------------------------------------------------
# llmcc's kernels are float32 only (no double path), so torch.autograd.gradcheck runs in float32:
# central differences with eps 1e-2 on small inputs, tolerance atol 1e-2, rtol 1e-2 (float32
# rounding in a difference quotient is about 1e-7 |f| / eps).
GRADCHECK = dict(eps=1e-2, atol=1e-2, rtol=1e-2, check_undefined_grad=False)


@pytest.mark.filterwarnings("ignore:Input #.* is not a double precision")
@pytest.mark.parametrize("name", ["attention", "attention_qkv", "layernorm", "linear", "rmsnorm", "gelu", "silu", "rope",
                                  "cross_entropy"])
def test_gradcheck_float32(name):
    r = lambda *s: torch.randn(*s, requires_grad=True)  # noqa: E731
    cases = {
        "attention": (lambda q, k, v: llmcc_torch.attention(q, k, v, 2, 1), (r(1, 5, 8), r(1, 5, 4), r(1, 5, 4))),
        "attention_qkv": (lambda t: llmcc_torch.attention_qkv(t, 2), (r(2, 4, 12),)),
        "layernorm": (llmcc_torch.layernorm, (r(3, 6), r(6), r(6))),
        "linear": (llmcc_torch.linear, (r(2, 3, 5), r(4, 5), r(4))),
        "rmsnorm": (llmcc_torch.rmsnorm, (r(3, 6), r(6))),
        "gelu": (llmcc_torch.gelu, (r(9),)),
        "silu": (llmcc_torch.silu, (r(9),)),
        "rope": (lambda x: llmcc_torch.rope(x, 2, 10000.0, 3), (r(1, 4, 8),)),
        "cross_entropy": (lambda lg: llmcc_torch.cross_entropy(lg, torch.tensor([1, 0, 4])), (r(3, 5),)),
    }
    fn, inputs = cases[name]
    assert torch.autograd.gradcheck(fn, inputs, **GRADCHECK)
