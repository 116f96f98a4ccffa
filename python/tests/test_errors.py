"""Bad input raises a Python exception carrying llmcc's message ("[op] what ... expected ..."),
from the Python entry points and from the operators called directly through torch.ops.llmcc."""
import pytest
import torch

import llmcc_torch


def test_wrong_dtype_is_a_type_error():
    x = torch.randn(2, 4, 16, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"\[attention_qkv\] qkv has dtype torch.float64, expected torch.float32"):
        llmcc_torch.attention_qkv(x, 2)
    with pytest.raises(TypeError, match=r"\[attention_qkv\] qkv has dtype Double, expected float32"):
        torch.ops.llmcc.attention_qkv(x, 2, 2)  # the C++ check
    with pytest.raises(TypeError, match=r"\[gelu\] x has dtype torch.bfloat16"):
        llmcc_torch.gelu(torch.randn(3, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match=r"\[cross_entropy\] targets has dtype torch.float32, expected int64"):
        llmcc_torch.cross_entropy(torch.randn(3, 5), torch.zeros(3))
    with pytest.raises(TypeError, match=r"\[Gpt2Block\] x has dtype torch.float64"):
        llmcc_torch.Gpt2Block(16, 2)(torch.randn(1, 2, 16, dtype=torch.float64))


def test_wrong_device_is_a_value_error():
    x = torch.randn(2, 4, 16, device="meta")
    with pytest.raises(ValueError, match=r"\[layernorm\] x is on meta, expected a CPU tensor"):
        llmcc_torch.layernorm(x, torch.randn(16), torch.randn(16))
    with pytest.raises(ValueError, match=r"\[LlamaBlock\] x is on meta"):
        llmcc_torch.LlamaBlock(16, 2, 1, 24)(x)


def test_wrong_shapes_are_value_errors_with_llmccs_message():
    with pytest.raises(ValueError, match=r"\[attention_qkv\] .*"):
        llmcc_torch.attention_qkv(torch.randn(2, 4, 15), 2)  # 15 is not (2 + 2 * 2) * HS
    with pytest.raises(ValueError, match=r"\[attention\] .*"):
        llmcc_torch.attention(torch.randn(2, 4, 16), torch.randn(2, 5, 16), torch.randn(2, 5, 16), 2)
    with pytest.raises(ValueError, match=r"\[layernorm\] .*"):
        llmcc_torch.layernorm(torch.randn(3, 8), torch.randn(7), torch.randn(8))
    with pytest.raises(ValueError, match=r"\[cross_entropy\] .*"):
        llmcc_torch.cross_entropy(torch.randn(3, 5), torch.tensor([0, 9, 1]))  # a target out of range
    with pytest.raises(ValueError, match=r"\[rope\] .*"):
        llmcc_torch.rope(torch.randn(1, 3, 12), 4)  # head size 3 is odd
    with pytest.raises(ValueError, match=r"\[gelu\] x has 0 dimensions"):
        llmcc_torch.gelu(torch.tensor(1.0))


def test_wrong_block_configuration_and_input_are_value_errors():
    with pytest.raises(ValueError, match=r"\[Gpt2Block\] n_embd \(30\) must be a positive multiple of n_head \(4\)"):
        llmcc_torch.Gpt2Block(30, 4)
    with pytest.raises(ValueError, match=r"\[LlamaBlock\] n_kv_head \(3\) must divide n_head \(4\)"):
        llmcc_torch.LlamaBlock(32, 4, 3, 48)
    block = llmcc_torch.Gpt2Block(32, 4)
    with pytest.raises(ValueError, match=r"\[Gpt2Block\] x has shape \(1, 2, 16\), expected \(B, T, 32\)"):
        block(torch.randn(1, 2, 16))
    with pytest.raises(ValueError, match=r"\[Gpt2Block\] x has 2 dimensions"):
        block(torch.randn(2, 32))
