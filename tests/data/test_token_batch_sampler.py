"""Token-budget batches: every example once within the budget, reproducible shuffles, DDP shards,
and the padding they save."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer.data.collation import iter_batches
from transformer.data.token_batch_sampler import TokenBatchSampler, padding_stats


def widths_of(lengths, batch):
    return [max(lengths[i]) + 1 if isinstance(lengths[i], tuple) else lengths[i] for i in batch]


LENGTHS = [(i * 7 % 23 + 1, i * 11 % 19 + 1) for i in range(500)]


def test_every_example_once_per_epoch_within_budget() -> None:
    sampler = TokenBatchSampler(LENGTHS, max_tokens=256, seed=3)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for b in batches for i in b) == list(range(len(LENGTHS)))
        for batch in batches:
            assert len(batch) * max(widths_of(LENGTHS, batch)) <= 256


def test_budget_matches_collated_tensors() -> None:
    pairs = [([1] * s, [1] * t) for s, t in LENGTHS]
    sampler = TokenBatchSampler(LENGTHS, max_tokens=300)
    for batch in iter_batches(pairs, sampler):
        assert len(batch) * max(batch.src.size(1), batch.tgt_in.size(1)) <= 300


def test_shuffle_is_seeded_and_changes_by_epoch() -> None:
    def epoch_of(seed: int, epoch: int) -> list[list[int]]:
        sampler = TokenBatchSampler(LENGTHS, max_tokens=256, seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert epoch_of(0, 0) == epoch_of(0, 0)
    assert epoch_of(0, 0) != epoch_of(0, 1)
    assert epoch_of(0, 0) != epoch_of(1, 0)
    # the batch count is a property of the lengths, not of the shuffle
    assert len(epoch_of(0, 0)) == len(epoch_of(0, 1)) == len(epoch_of(1, 0))


def test_unshuffled_batches_go_by_length() -> None:
    widths = [9, 1, 5, 3, 7, 2]
    sampler = TokenBatchSampler(widths, max_tokens=10, shuffle=False)
    assert list(sampler) == [[1, 5, 3], [2], [4], [0]]
    sampler.set_epoch(5)
    assert list(sampler) == [[1, 5, 3], [2], [4], [0]]


def test_buckets_reduce_padding_against_random_batches() -> None:
    # translation-like lengths: the target about as long as the source
    lengths = [
        (n, max(1, n + i % 5 - 2)) for i, n in enumerate((i * 37 % 41) + 1 for i in range(600))
    ]
    bucketed = padding_stats(lengths, list(TokenBatchSampler(lengths, max_tokens=512, seed=0)))
    size = -(-len(lengths) // bucketed.num_batches)  # as many batches, random members
    order = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(0)).tolist()
    shuffled = padding_stats(lengths, [order[i : i + size] for i in range(0, len(order), size)])
    assert bucketed.padding_share < shuffled.padding_share / 3


def test_max_sentences() -> None:
    sampler = TokenBatchSampler([1] * 10, max_tokens=1000, max_sentences=3, shuffle=False)
    assert [len(b) for b in sampler] == [3, 3, 3, 1]


def test_example_wider_than_budget_is_refused() -> None:
    with pytest.raises(
        ValueError, match="example 1 needs 40 token positions, more than max_tokens=32"
    ):
        TokenBatchSampler([3, 40, 2], max_tokens=32)
    with pytest.raises(ValueError, match="rank"):
        TokenBatchSampler([3], max_tokens=32, rank=2, world_size=2)
    assert (
        list(TokenBatchSampler([], max_tokens=32)) == []
        and len(TokenBatchSampler([], max_tokens=8)) == 0
    )


@settings(max_examples=60, deadline=None)
@given(
    widths=st.lists(st.integers(1, 30), min_size=1, max_size=120),
    world_size=st.integers(1, 5),
    max_tokens=st.integers(30, 200),
    epoch=st.integers(0, 3),
)
def test_ddp_shards_are_disjoint_equal_and_complete(
    widths: list[int], world_size: int, max_tokens: int, epoch: int
) -> None:
    shards = []
    for rank in range(world_size):
        sampler = TokenBatchSampler(
            widths, max_tokens=max_tokens, seed=7, rank=rank, world_size=world_size
        )
        sampler.set_epoch(epoch)
        shards.append(list(sampler))
        assert len(shards[-1]) == len(sampler)
    # the same number of batches on every rank, so DDP's collectives never wait forever
    assert len({len(s) for s in shards}) == 1
    seen = Counter(i for shard in shards for batch in shard for i in batch)
    assert set(seen) == set(range(len(widths)))
    if sampler.num_repeated == 0:
        assert set(seen.values()) == {1}  # no example on two ranks, none twice
    else:  # only when every batch is down to one example
        assert sampler.num_repeated < world_size
        assert sum(seen.values()) == len(widths) + sampler.num_repeated
        assert all(len(batch) == 1 for shard in shards for batch in shard)
    for shard in shards:
        for batch in shard:
            assert batch and len(batch) * max(widths[i] for i in batch) <= max_tokens


def test_realistic_ddp_split_needs_no_repeats() -> None:
    for world_size in (2, 3, 4, 8):
        samplers = [
            TokenBatchSampler(LENGTHS, max_tokens=300, rank=r, world_size=world_size)
            for r in range(world_size)
        ]
        assert samplers[0].num_repeated == 0
        indices = [i for s in samplers for batch in s for i in batch]
        assert sorted(indices) == list(range(len(LENGTHS)))
        assert len({len(list(s)) for s in samplers}) == 1


def test_the_array_plan_is_the_samplers_batches_rank_by_rank():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 30, size=(500, 2))
    for world in (1, 2, 3):
        for rank in range(world):
            sampler = TokenBatchSampler(lengths, max_tokens=120, seed=5, rank=rank, world_size=world)
            for epoch in (0, 3):
                sampler.set_epoch(epoch)
                indices, bounds = sampler.plan()
                batches = [indices[bounds[j]:bounds[j + 1]].tolist() for j in range(len(bounds) - 1)]
                assert batches == list(sampler)
    # repeated batches (more ranks than batches can be split into) are planned too
    tiny = TokenBatchSampler([(3, 3)] * 3, max_tokens=4, world_size=2, rank=1)
    indices, bounds = tiny.plan()
    assert [indices[bounds[j]:bounds[j + 1]].tolist() for j in range(len(bounds) - 1)] == list(tiny)
