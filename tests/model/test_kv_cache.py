"""KVCache and DecoderCache: growth, reordering (only the filled part counts), self or cross only."""

from __future__ import annotations

import pytest
import torch

from transformer.model import DecoderCache, KVCache


def steps(cache: KVCache, count: int, *, batch: int = 3, start: int = 0) -> torch.Tensor:
    """Append ``count`` single steps whose values encode (row, position); return all of them."""
    for t in range(start, start + count):
        x = (torch.arange(batch, dtype=torch.float)[:, None, None, None] * 100 + t).expand(batch, 2, 1, 4)
        k, _ = cache.update(x, x + 0.5)
    return k


def test_growth_keeps_every_step():
    cache = KVCache()
    keys = steps(cache, 37)
    assert cache.length == 37 and keys.shape == (3, 2, 37, 4)
    assert torch.equal(keys[:, 0, :, 0], torch.arange(3.0)[:, None] * 100 + torch.arange(37.0))
    assert torch.equal(cache.value, cache.key + 0.5)


def test_reorder_then_grow():
    cache = KVCache()
    steps(cache, 9)  # storage holds more positions than are filled
    index = torch.tensor([2, 2, 0, 1])
    cache.reorder(index)
    assert cache.length == 9 and cache.key.shape == (4, 2, 9, 4)
    assert torch.equal(cache.key[:, 0, :, 0], index[:, None] * 100.0 + torch.arange(9.0))
    keys = steps(cache, 20, batch=4, start=9)  # grows past the old storage after reordering
    assert torch.equal(keys[:, 0, :9, 0], index[:, None] * 100.0 + torch.arange(9.0))
    assert torch.equal(keys[:, 0, 9:, 0], torch.arange(4.0)[:, None] * 100 + torch.arange(9.0, 29.0))
    assert torch.equal(cache.value, cache.key + 0.5)


def test_decoder_cache_reorder_self_leaves_cross_alone():
    cache = DecoderCache.empty(2)
    for layer in range(2):
        steps(cache.self_attention[layer], 3)
        steps(cache.cross_attention[layer], 5)
    before = [c.key.clone() for c in cache.cross_attention]
    index = torch.tensor([1, 0, 2])
    cache.reorder_self(index)
    for layer in range(2):
        assert torch.equal(cache.self_attention[layer].key[:, 0, :, 0],
                           index[:, None] * 100.0 + torch.arange(3.0))
        assert torch.equal(cache.cross_attention[layer].key, before[layer])
    self_before = cache.self_attention[0].key.clone()
    cache.reorder_cross(index)
    assert torch.equal(cache.cross_attention[0].key, before[0][index])
    assert torch.equal(cache.self_attention[0].key, self_before)
    cache.reorder(index)
    assert torch.equal(cache.self_attention[1].key, self_before[index])
    assert torch.equal(cache.cross_attention[1].key, before[1][index][index])
    assert cache.length == 3



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
        grouped.update(k, 2 * k)
        flat.update(k, 2 * k)
        keep = torch.arange(sentences)
        if step % 7 == 6:
            keep = keep[keep != step % sentences]  # one sentence leaves
        parents = torch.randint(0, per_sentence, (keep.numel(), group), generator=g)
        index = (keep[:, None] * per_sentence + parents).view(-1)
        grouped.reorder(index, group=group)
        flat.reorder(index)
        sentences, per_sentence = keep.numel(), group
        assert grouped.groups == group and grouped.rows == index.numel()
        assert torch.equal(grouped.key, flat.key) and torch.equal(grouped.value, flat.value)
    assert grouped.length == 23
    grouped.reorder(torch.tensor([2, 0]))  # a plain selection makes it flat again
    assert grouped.groups == 1 and torch.equal(grouped.key, flat.key[[2, 0]])


def test_grouped_selection_must_stay_within_sentences():
    cache = KVCache()
    steps(cache, 2, batch=4)
    cache.reorder(torch.tensor([0, 1, 2, 3]), group=2)
    with pytest.raises(ValueError, match="one group"):
        cache.reorder(torch.tensor([0, 2, 2, 3]), group=2)
    with pytest.raises(ValueError, match="groups of 2"):
        cache.reorder(torch.tensor([0, 1, 2]), group=2)


def test_decoder_cache_reorders_self_attention_grouped():
    cache, single = DecoderCache.empty(2), KVCache()
    for layer in range(2):
        steps(cache.self_attention[layer], 3, batch=4)
        steps(cache.cross_attention[layer], 2, batch=2)
    steps(single, 3, batch=4)
    for index in (torch.tensor([1, 1, 0, 2, 3, 2]), torch.tensor([2, 0, 0, 4, 3, 5]), torch.tensor([4, 5, 5])):
        group = 3 if index.numel() == 6 else 1
        cache.reorder_self(index, group=group)
        single.reorder(index, group=group)
        for layer in range(2):
            assert torch.equal(cache.self_attention[layer].key, single.key)
    assert cache.cross_attention[0].rows == 2
