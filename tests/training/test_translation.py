"""The translation pipeline's per-epoch batch order (its configuration: tests/config/test_runs.py)."""

from __future__ import annotations

import torch

from transformer.data.batching import EncodedPairs
from transformer.training.translation import PairEpochs


def test_epochs_are_deterministic_shards_of_the_same_order(synth):
    pairs = EncodedPairs(synth.make_pairs(60, seed=1), max_len=16)
    data = PairEpochs(pairs, max_tokens=40, seed=3)
    first, again, second = data.for_epoch(0), data.for_epoch(0), data.for_epoch(1)
    assert len(first) == len(data) > 1
    assert all(torch.equal(a.src, b.src) for a, b in zip(first, again, strict=True))
    assert any(not torch.equal(a.src, b.src) or a.src.shape != b.src.shape
               for a, b in zip(first, second, strict=True))
    assert [b.src.tolist() for b in first[2:4]] == [first[2].src.tolist(), first[3].src.tolist()]
    # two ranks see disjoint halves of the same epoch, together every pair once
    shards = [PairEpochs(pairs, max_tokens=40, seed=3, rank=r, world_size=2).for_epoch(0)
              for r in range(2)]
    assert len(shards[0]) == len(shards[1])
    seen = sorted(n for shard in shards for b in shard for n in (b.src != 0).sum(1).tolist())
    assert seen == sorted(len(s) for s, _ in pairs)
