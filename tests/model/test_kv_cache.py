"""KVCache and DecoderCache: growth, reordering (only the filled part counts) and cross=False."""

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


def test_decoder_cache_reorder_cross_false_leaves_cross_alone():
    cache = DecoderCache.empty(2)
    for layer in range(2):
        steps(cache.self_attention[layer], 3)
        steps(cache.cross_attention[layer], 5)
    before = [c.key.clone() for c in cache.cross_attention]
    index = torch.tensor([1, 0, 2])
    cache.reorder(index, cross=False)
    for layer in range(2):
        assert torch.equal(cache.self_attention[layer].key[:, 0, :, 0],
                           index[:, None] * 100.0 + torch.arange(3.0))
        assert torch.equal(cache.cross_attention[layer].key, before[layer])
    cache.reorder(index)
    assert torch.equal(cache.cross_attention[0].key, before[0][index])
    assert cache.length == 3
