"""Multi-head attention equals torch.nn.MultiheadAttention with copied weights."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer.model import MultiHeadAttention, padding_mask


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
    from transformer.model import KVCache

    cache = KVCache()
    memory = torch.randn(1, 4, 16)
    x = torch.randn(1, 1, 16)
    first, _ = mha(x, memory, cache=cache)
    second, _ = mha(x, None, cache=cache)  # memory no longer needed
    torch.testing.assert_close(first, second)
    assert cache.length == 4


def test_cross_attention_memory_shared_by_groups_of_rows_equals_repeating_it():
    """G rows per memory row (beams of one sentence) give what repeating each memory row G times
    gives, with and without a cache, weights included."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, num_heads=4, cross=True).eval()
    from transformer.model import KVCache

    group = 3
    memory = torch.randn(2, 5, 16)
    tokens = torch.tensor([[4, 5, 6, 7, 8], [4, 5, 0, 0, 0]])
    x = torch.randn(2 * group, 2, 16)
    repeated = memory.repeat_interleave(group, dim=0)
    expected, expected_w = mha(x, repeated, mask=padding_mask(tokens.repeat_interleave(group, 0), 0),
                               need_weights=True)
    out, weights = mha(x, memory, mask=padding_mask(tokens, 0), need_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights, expected_w, atol=1e-6, rtol=1e-5)
    cache = KVCache()
    mha(x[:, :1], memory, mask=padding_mask(tokens, 0), cache=cache)
    cached, _ = mha(x[:, 1:], None, mask=padding_mask(tokens, 0), cache=cache)
    torch.testing.assert_close(cached, expected[:, 1:], atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="evenly"):
        mha(x[:5], memory)
    with pytest.raises(ValueError, match="same for every query"):
        mha(x, memory, mask=torch.ones(2, 1, 2, 5, dtype=torch.bool))


def test_self_attention_through_a_grouped_cache_equals_a_copying_cache():
    """Beam search's steps: the grouped cache's slot attention gives the outputs that a cache which
    copies the chosen beams' histories gives."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, num_heads=2).eval()
    from transformer.model import KVCache

    g = torch.Generator().manual_seed(1)
    grouped, flat = KVCache(), KVCache()
    rows, group = 2, 3
    for _ in range(12):
        x = torch.randn(rows, 1, 16)
        with torch.inference_mode():
            out_g, _ = mha(x, cache=grouped)
            out_f, _ = mha(x, cache=flat)
        torch.testing.assert_close(out_g, out_f, atol=1e-6, rtol=1e-5)
        per = rows // 2
        index = (torch.arange(2)[:, None] * per + torch.randint(0, per, (2, group), generator=g)).view(-1)
        grouped.reorder(index, group=group)
        flat.reorder(index)
        rows = 2 * group
    assert grouped.groups == group
