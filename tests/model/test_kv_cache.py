"""KVCache and DecoderCache: growth, reordering (only the filled part counts), reset."""

from __future__ import annotations

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


def test_decoder_cache_reorders_every_layer_self_and_cross():
    cache = DecoderCache.empty(2)
    for layer in range(2):
        steps(cache.self_attention[layer], 3)
        steps(cache.cross_attention[layer], 5)
    before = [c.key.clone() for c in (*cache.self_attention, *cache.cross_attention)]
    index = torch.tensor([1, 0, 2, 2])
    cache.reorder(index)
    for got, want in zip((*cache.self_attention, *cache.cross_attention), before, strict=True):
        assert torch.equal(got.key, want[index]) and torch.equal(got.value, want[index] + 0.5)
    assert cache.length == 3


def test_reset_empties_the_cache():
    cache = DecoderCache.empty(2)
    steps(cache.self_attention[0], 3)
    steps(cache.cross_attention[1], 2)
    cache.reset()
    assert cache.length == 0 and all(c.is_empty and c.rows == 0
                                     for c in (*cache.self_attention, *cache.cross_attention))
    keys = steps(cache.self_attention[0], 2, batch=5)  # usable again, with another batch size
    assert keys.shape == (5, 2, 2, 4)
