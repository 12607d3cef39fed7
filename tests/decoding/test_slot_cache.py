"""Beam search's SlotCache gives every beam the history that a plain KVCache, which copies the
chosen rows, gives it."""

from __future__ import annotations

import pytest
import torch

from transformer.decoding.slot_cache import Selection, SlotCache, reorder
from transformer.model import KVCache


def steps(cache, count: int, *, batch: int = 3, start: int = 0) -> None:
    """Append ``count`` single steps whose values encode (row, position)."""
    for t in range(start, start + count):
        x = (torch.arange(batch, dtype=torch.float)[:, None, None, None] * 100 + t).expand(batch, 2, 1, 4)
        if isinstance(cache, SlotCache):
            cache.append(x, x + 0.5)
        else:
            cache.update(x, x + 0.5)


def select(cache, index: torch.Tensor, group: int = 1):
    return reorder(cache, Selection.of(index, group, cache=cache))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grouped_cache_equals_a_copying_cache(seed):
    """Random appends and beam selections (within sentences, a sentence leaving now and then,
    growth past the storage): a grouped cache gives every row the history that a flat cache,
    which copies rows, gives it."""
    g = torch.Generator().manual_seed(seed)
    group, heads, dh = 3, 2, 4
    grouped, flat = KVCache(), KVCache()
    sentences, per_sentence = 5, 1  # one row per sentence before the first selection
    for step in range(23):
        k = torch.randn(sentences * per_sentence, heads, 1, dh, generator=g)
        if isinstance(grouped, SlotCache):
            grouped.append(k, 2 * k)
        else:
            grouped.update(k, 2 * k)
        flat.update(k, 2 * k)
        keep = torch.arange(sentences)
        if step % 7 == 6:
            keep = keep[keep != step % sentences]  # one sentence leaves
        parents = torch.randint(0, per_sentence, (keep.numel(), group), generator=g)
        index = (keep[:, None] * per_sentence + parents).view(-1)
        grouped = select(grouped, index, group)
        flat.reorder(index)
        sentences, per_sentence = keep.numel(), group
        assert isinstance(grouped, SlotCache) and grouped.groups == group and grouped.rows == index.numel()
        assert torch.equal(grouped.key, flat.key) and torch.equal(grouped.value, flat.value)
    assert grouped.length == 23
    back = select(grouped, torch.tensor([2, 0]))  # a plain selection makes it flat again
    assert isinstance(back, KVCache) and torch.equal(back.key, flat.key[[2, 0]])
    regrouped = select(grouped, torch.arange(6), 2)  # another group size: copied into new groups
    assert isinstance(regrouped, SlotCache) and regrouped.groups == 2
    assert torch.equal(regrouped.key, flat.key[:6])


def test_slot_choice_moves_no_keys():
    """Within sentences only the slot table changes: the stored keys stay where they are."""
    flat = KVCache()
    steps(flat, 3, batch=4)
    cache = select(flat, torch.arange(4), 2)
    stored = cache.grouped()[0].clone()
    cache = select(cache, torch.tensor([1, 1, 2, 3]), 2)
    assert torch.equal(cache.grouped()[0], stored)
    assert cache.key[:, 0, :, 0].tolist() == [[100.0, 101.0, 102.0]] * 2 + [[200.0, 201.0, 202.0],
                                                                          [300.0, 301.0, 302.0]]


def test_grouped_selection_must_stay_within_sentences():
    flat = KVCache()
    steps(flat, 2, batch=4)
    cache = select(flat, torch.tensor([0, 1, 2, 3]), 2)
    with pytest.raises(ValueError, match="one group"):
        select(cache, torch.tensor([0, 2, 2, 3]), 2)
    with pytest.raises(ValueError, match="groups of 2"):
        select(cache, torch.tensor([0, 1, 2]), 2)
