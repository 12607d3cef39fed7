"""The position-major StepCache holds what the model's KVCache holds: appends of one position (the
fused projection's key/value half) or of several, row selections, growth past its storage."""

from __future__ import annotations

import pytest
import torch

from transformer.decoding.slot_cache import Selection, SlotCache, reorder
from transformer.decoding.step_cache import INITIAL_CAPACITY, StepCache
from transformer.model import KVCache

HEADS, DH = 2, 3
D = HEADS * DH


def projected(rows: int, g: torch.Generator) -> torch.Tensor:
    """A fused Q/K/V projection's output (rows, 3 * D)."""
    return torch.randn(rows, 3 * D, generator=g)


def heads_of(x: torch.Tensor) -> torch.Tensor:
    """(rows, D) -> (rows, H, 1, Dh), the model's split of a single position."""
    return x.view(x.size(0), HEADS, 1, DH)


@pytest.mark.parametrize("seed", [0, 1])
def test_step_cache_equals_the_model_cache(seed):
    g = torch.Generator().manual_seed(seed)
    ours, reference = StepCache(heads=HEADS), KVCache()
    rows = 4
    for t in range(2 * INITIAL_CAPACITY + 3):  # grows twice
        qkv = projected(rows, g)
        key, value = ours.append_rows(qkv[:, D:])
        want_key, want_value = reference.update(heads_of(qkv[:, D : 2 * D]), heads_of(qkv[:, 2 * D :]))
        assert torch.equal(key, want_key) and torch.equal(value, want_value)
        index = None
        if t % 5 == 4 and rows > 1:  # a row leaves, the others swap places
            index = torch.arange(rows - 1).flip(0)
        elif t % 3 == 2:  # beams chosen: as many rows, one of them twice
            index = torch.randint(0, rows, (rows,), generator=g)
        if index is not None:
            ours.reorder(index)
            reference.reorder(index)
            rows = index.numel()
        assert ours.length == reference.length and ours.rows == reference.rows
    assert torch.equal(ours.key, reference.key) and torch.equal(ours.value, reference.value)


def test_update_takes_several_positions_and_checks_heads():
    g = torch.Generator().manual_seed(0)
    ours, reference = StepCache(heads=HEADS), KVCache()
    key, value = torch.randn(3, HEADS, 5, DH, generator=g), torch.randn(3, HEADS, 5, DH, generator=g)
    for cache in (ours, reference):
        cache.update(key, value)
        cache.update(key[:, :, :1] + 1, value[:, :, :1] - 1)
    assert torch.equal(ours.key, reference.key) and torch.equal(ours.value, reference.value)
    with pytest.raises(ValueError, match="2 heads"):
        ours.update(torch.randn(3, 4, 1, 2), torch.randn(3, 4, 1, 2))


def test_grouping_and_flattening_go_through_step_caches():
    """A selection of beams turns a StepCache into a SlotCache and back (with ``flat``)."""
    g = torch.Generator().manual_seed(0)
    cache = StepCache(heads=HEADS)
    reference = KVCache()
    for _ in range(3):
        qkv = projected(2, g)
        cache.append_rows(qkv[:, D:])
        reference.update(heads_of(qkv[:, D : 2 * D]), heads_of(qkv[:, 2 * D :]))
    index = torch.tensor([0, 0, 1, 1, 1, 1])  # 3 beams each for 2 sentences
    grouped = reorder(cache, Selection.of(index, 3, cache=cache))
    reference.reorder(index)
    assert isinstance(grouped, SlotCache) and torch.equal(grouped.key, reference.key)
    back = reorder(grouped, Selection.of(torch.tensor([5, 0]), 1, cache=grouped),
                   flat=lambda: StepCache(heads=HEADS))
    reference.reorder(torch.tensor([5, 0]))
    assert isinstance(back, StepCache) and torch.equal(back.value, reference.value)
