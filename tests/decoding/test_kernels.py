"""The fast path's attention kernels equal the reference attention (equation 1)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer.decoding.kernels import (
    attention_over_slots,
    fold_groups,
    step_attention,
    unfold_groups,
)
from transformer.model import attention, padding_mask


def random_qkv(b=2, h=3, lq=5, lk=7, dh=8):
    return torch.randn(b, h, lq, dh), torch.randn(b, h, lk, dh), torch.randn(b, h, lk, dh)


@pytest.mark.parametrize("lk", [8, 33, 100])
@pytest.mark.parametrize("lq", [1, 3])
def test_step_attention_equals_sdpa(lq, lk):
    # one query against many keys takes the spelled-out path on a CPU: same result as SDPA,
    # fully masked rows (a finished, all-padding source) included
    torch.manual_seed(lk)
    q, k, v = random_qkv(b=4, lq=lq, lk=lk)
    mask = torch.ones(4, 1, 1, lk, dtype=torch.bool)
    mask[1, ..., lk // 2 :] = False
    mask[3] = False
    out = step_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
    assert torch.all(out[3] == 0)
    torch.testing.assert_close(step_attention(q, k, v), F.scaled_dot_product_attention(q, k, v),
                               atol=1e-6, rtol=1e-5)


def test_fold_and_unfold_groups_are_inverse():
    x = torch.randn(6, 2, 3, 4)
    folded = fold_groups(x, 3)
    assert folded.shape == (2, 2, 9, 4)
    assert torch.equal(folded[1, :, 3:6], x[4])  # row 4 = beam 1 of sentence 1
    assert torch.equal(unfold_groups(folded, 3), x)
    assert fold_groups(x, 1) is x and unfold_groups(x, 1) is x


@pytest.mark.parametrize("t", [1, 2])
def test_beams_sharing_a_memory_row_equal_repeating_it(t):
    """G rows per memory row (the beams of a sentence) folded into one row's queries give what
    repeating each memory row G times gives."""
    torch.manual_seed(0)
    group = 3
    q = torch.randn(2 * group, 4, t, 8)  # (G * N, H, T, Dh)
    _, k, v = random_qkv(b=2, h=4, lk=5)
    tokens = torch.tensor([[4, 5, 6, 7, 8], [4, 5, 0, 0, 0]])
    mask = padding_mask(tokens, 0)  # (N, 1, 1, S)
    out = unfold_groups(step_attention(fold_groups(q, group), k, v, mask), group)
    expected, _ = attention(q, *(x.repeat_interleave(group, dim=0) for x in (k, v, mask)))
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)


def test_attention_over_slots_equals_attention_over_each_beams_own_keys():
    """Beam g reads, at each position, the key of the slot its history is in: the same as plain
    attention over keys gathered per beam (which is what a reordered cache would hold)."""
    torch.manual_seed(0)
    n, h, g, length, dh = 3, 2, 4, 7, 8
    query = torch.randn(n, h, g, dh)
    stored_k, stored_v = torch.randn(n, h, length, g, dh), torch.randn(n, h, length, g, dh)
    slots = torch.randint(0, g, (n, g, length))
    out = attention_over_slots(
        query, stored_k.reshape(n, h, length * g, dh), stored_v.reshape(n, h, length * g, dh), slots
    )
    for s in range(n):
        for beam in range(g):
            picked = slots[s, beam]  # (L,)
            keys = stored_k[s, :, torch.arange(length), picked]  # (H, L, Dh)
            values = stored_v[s, :, torch.arange(length), picked]
            expected = F.scaled_dot_product_attention(query[s, :, beam : beam + 1], keys, values)
            torch.testing.assert_close(out[s, :, beam : beam + 1], expected, atol=1e-6, rtol=1e-5)
