"""The Trainer's per-epoch batches, the same class for both tasks: deterministic per epoch, sharded
across ranks, within the token budget, collated only when asked for."""

from __future__ import annotations

import functools
import random

import pytest
import torch

from transformer.data.collation import collate_classification, collate_pairs
from transformer.data.encoding import EncodedPairs
from transformer.data.epoch_batches import Epochs, LazyBatches

PAD = 0


def make_pairs(n: int, *, seed: int) -> list[tuple[list[int], list[int]]]:
    rng = random.Random(seed)
    return [([rng.randrange(4, 20) for _ in range(rng.randint(2, 7))],
             [rng.randrange(4, 20) for _ in range(rng.randint(2, 7))]) for _ in range(n)]


def pair_epochs(pairs: EncodedPairs, **kwargs) -> Epochs:
    return Epochs(pairs, widths=pairs.lengths, collate=collate_pairs, max_tokens=40, seed=3, **kwargs)


def test_epochs_are_deterministic_shards_of_the_same_order():
    pairs = EncodedPairs(make_pairs(60, seed=1), max_len=16)
    data = pair_epochs(pairs)
    first, again, second = data.for_epoch(0), data.for_epoch(0), data.for_epoch(1)
    assert len(first) == len(data) > 1
    assert all(torch.equal(a.src, b.src) for a, b in zip(first, again, strict=True))
    assert any(not torch.equal(a.src, b.src) or a.src.shape != b.src.shape
               for a, b in zip(first, second, strict=True))
    assert [b.src.tolist() for b in first[2:4]] == [first[2].src.tolist(), first[3].src.tolist()]
    # two ranks see disjoint halves of the same epoch, together every pair once
    shards = [pair_epochs(pairs, rank=r, world_size=2).for_epoch(0) for r in range(2)]
    assert len(shards[0]) == len(shards[1])
    seen = sorted(n for shard in shards for b in shard for n in (b.src != 0).sum(1).tolist())
    assert seen == sorted(len(s) for s, _ in pairs)


def test_classification_epochs_cover_every_example_once_within_the_token_budget():
    ids = [[5] * n for n in [1, 3, 0, 7, 2, 9, 4, 4, 6, 1]]
    labels = [[i % 3] for i in range(len(ids))]
    data = Epochs(
        list(zip(ids, labels, strict=True)),
        widths=[max(len(row), 1) + 1 for row in ids],  # one CLS position per row
        collate=functools.partial(collate_classification, num_labels=3, multi_label=False, pad_id=PAD),
        max_tokens=12,
    )
    for epoch in range(2):
        batches = data.for_epoch(epoch)
        assert len(batches) == len(data)
        seen = []
        for batch in batches:
            assert batch.tokens.numel() + len(batch) <= 12
            seen.extend(int(t) for t in batch.targets)
        assert sorted(seen) == sorted(lab[0] for lab in labels)


def test_lazy_batches_collate_only_what_is_asked_for():
    calls = []

    def collate(indices):
        calls.append(list(indices))
        return sum(indices)

    lazy = LazyBatches([[0, 1], [2], [3, 4, 5]], collate)
    assert len(lazy) == 3 and calls == []
    assert lazy[2] == 12 and calls == [[3, 4, 5]]
    assert lazy[1:] == [2, 12] and calls[1:] == [[2], [3, 4, 5]]


def test_epochs_check_the_widths_match_the_items():
    with pytest.raises(ValueError, match="3 items but 2 widths"):
        Epochs([1, 2, 3], widths=[1, 1], collate=list, max_tokens=4)
