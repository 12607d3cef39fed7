"""Scaled dot-product attention against PyTorch's reference, and its two paths against each other."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer.model import attention, padding_mask, subsequent_mask


def random_qkv(b=2, h=3, lq=5, lk=7, dh=8):
    return torch.randn(b, h, lq, dh), torch.randn(b, h, lk, dh), torch.randn(b, h, lk, dh)


@pytest.mark.parametrize("need_weights", [False, True])
def test_equals_torch_sdpa_without_mask(need_weights):
    q, k, v = random_qkv()
    out, _ = attention(q, k, v, need_weights=need_weights)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("need_weights", [False, True])
def test_equals_torch_sdpa_with_padding_and_causal_mask(need_weights):
    q, k, v = random_qkv(lq=6, lk=6)
    tokens = torch.tensor([[5, 6, 7, 8, 9, 4], [5, 6, 7, 0, 0, 0]])
    mask = padding_mask(tokens, 0) & subsequent_mask(6)  # (B, 1, 6, 6)
    out, _ = attention(q, k, v, mask, need_weights=need_weights)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("lk", [8, 33, 100])
def test_single_query_decoding_step_equals_sdpa(lk):
    # one query against many keys (a cached decoding step), fully masked rows (a finished,
    # all-padding source) included
    q, k, v = random_qkv(b=4, lq=1, lk=lk)
    mask = torch.ones(4, 1, 1, lk, dtype=torch.bool)
    mask[1, ..., lk // 2 :] = False
    mask[3] = False
    out, weights = attention(q, k, v, mask)
    assert weights is None
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
    assert torch.all(out[3] == 0)


def test_bfloat16_takes_the_spelled_out_path_and_matches_sdpa_forward_and_backward():
    q, k, v = (t.bfloat16().requires_grad_(True) for t in random_qkv(b=3, lq=6, lk=6))
    tokens = torch.tensor([[5, 6, 7, 8, 9, 4], [5, 6, 7, 0, 0, 0], [0] * 6])
    mask = padding_mask(tokens, 0) & subsequent_mask(6)
    out, _ = attention(q, k, v, mask)
    out.float().square().sum().backward()
    grads = [t.grad for t in (q, k, v)]
    ref_in = [t.detach().float().requires_grad_(True) for t in (q, k, v)]
    ref = F.scaled_dot_product_attention(*ref_in, attn_mask=mask)
    ref.square().sum().backward()
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)  # bf16: 8 bits of mantissa
    for got, want in zip(grads, (t.grad for t in ref_in), strict=True):
        torch.testing.assert_close(got.float(), want, atol=5e-2, rtol=5e-2)
    assert not torch.isnan(out).any() and torch.all(out[2] == 0)


def test_weights_are_a_softmax_over_allowed_keys():
    q, k, v = random_qkv()
    mask = torch.tensor([True, True, True, False, True, False, False])  # (Lk,)
    out, weights = attention(q, k, v, mask, need_weights=True)
    assert weights.shape == (2, 3, 5, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    assert torch.all(weights[..., ~mask] == 0)
    # equation (1) spelled out: softmax(Q K^T / sqrt(d_k)) V over the allowed keys
    scores = (q @ k.transpose(-2, -1))[..., mask] / 8**0.5
    torch.testing.assert_close(out, scores.softmax(-1) @ v[..., mask, :])


def test_fully_masked_query_gives_zeros_not_nan_on_both_paths():
    q, k, v = random_qkv(b=1)
    mask = torch.zeros(1, 1, 1, 7, dtype=torch.bool)
    fast, _ = attention(q, k, v, mask)
    slow, weights = attention(q, k, v, mask, need_weights=True)
    for t in (fast, slow, weights):
        assert not torch.isnan(t).any()
    assert torch.all(slow == 0) and torch.all(fast == 0)


def test_float_masks_are_refused():
    q, k, v = random_qkv()
    with pytest.raises(ValueError, match="boolean"):
        attention(q, k, v, torch.zeros(5, 7))


def test_subsequent_mask_with_offset():
    mask = subsequent_mask(2, offset=3)
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]
