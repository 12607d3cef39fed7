"""Multi-head attention equals torch.nn.MultiheadAttention with copied weights."""

from __future__ import annotations

import torch
from torch import nn

from transformer.model import KVCache, MultiHeadAttention, padding_mask, subsequent_mask


def test_self_attention_equals_torch():
    ours = MultiHeadAttention(d_model=24, num_heads=3).eval()
    ref = nn.MultiheadAttention(24, 3, batch_first=True).eval()
    with torch.no_grad():
        ours.qkv_proj.weight.copy_(ref.in_proj_weight)
        ours.qkv_proj.bias.copy_(ref.in_proj_bias)
        ours.out_proj.load_state_dict(ref.out_proj.state_dict())
    x = torch.randn(2, 5, 24)
    tokens = torch.tensor([[4, 5, 6, 7, 8], [4, 5, 0, 0, 0]])
    out, weights = ours(x, mask=padding_mask(tokens, 0), need_weights=True)
    ref_out, ref_weights = ref(x, x, x, key_padding_mask=tokens == 0, average_attn_weights=False)
    keep = tokens != 0
    torch.testing.assert_close(out[keep], ref_out[keep], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=1e-5)


def test_cross_attention_equals_torch():
    ours = MultiHeadAttention(d_model=24, num_heads=4, cross=True).eval()
    ref = nn.MultiheadAttention(24, 4, batch_first=True).eval()
    with torch.no_grad():
        ours.q_proj.weight.copy_(ref.in_proj_weight[:24])
        ours.q_proj.bias.copy_(ref.in_proj_bias[:24])
        ours.kv_proj.weight.copy_(ref.in_proj_weight[24:])
        ours.kv_proj.bias.copy_(ref.in_proj_bias[24:])
        ours.out_proj.load_state_dict(ref.out_proj.state_dict())
    x, memory = torch.randn(2, 3, 24), torch.randn(2, 6, 24)
    out, _ = ours(x, memory)
    torch.testing.assert_close(out, ref(x, memory, memory)[0], atol=1e-5, rtol=1e-5)


def test_cross_attention_cache_projects_memory_once():
    mha = MultiHeadAttention(d_model=16, num_heads=2, cross=True).eval()
    cache = KVCache()
    memory = torch.randn(1, 4, 16)
    x = torch.randn(1, 1, 16)
    first, _ = mha(x, memory, cache=cache)
    second, _ = mha(x, None, cache=cache)  # memory no longer needed
    torch.testing.assert_close(first, second)
    assert cache.length == 4


def test_self_attention_with_a_cache_equals_masked_attention_over_the_whole_sequence():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, num_heads=4).eval()
    x = torch.randn(2, 6, 16)
    expected, _ = mha(x, mask=subsequent_mask(6))
    cache = KVCache()
    first, _ = mha(x[:, :2], mask=subsequent_mask(2), cache=cache)  # a prefix of two at once
    rest = [mha(x[:, t : t + 1], cache=cache)[0] for t in range(2, 6)]
    torch.testing.assert_close(torch.cat([first, *rest], dim=1), expected, atol=1e-6, rtol=1e-5)
    assert cache.length == 6
