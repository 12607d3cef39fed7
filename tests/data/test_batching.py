"""Batching: max_len handling, token-budget buckets, reproducible shuffles, DDP shards, collation."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from transformer import ModelConfig, Transformer
from transformer.data.batching import (
    collate_classification,
    collate_pairs,
    collate_sources,
    encode_classification,
    encode_pairs,
    iter_batches,
)
from transformer.data.classification import ClassificationData
from transformer.data.parallel import ParallelCorpus
from transformer.data.sampler import TokenBatchSampler, padding_stats
from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer

WORDS = [
    "the",
    "a",
    "dog",
    "cat",
    "runs",
    "sleeps",
    "on",
    "mat",
    "der",
    "die",
    "das",
    "Hund",
    "Katze",
    "läuft",
    "schläft",
    "auf",
    "Matte",
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train([" ".join(WORDS)] * 10, vocab_size=290)


def corpus_of(src_words: list[int], tgt_words: list[int]) -> ParallelCorpus:
    """Sentences of the given word counts."""
    return ParallelCorpus(
        [" ".join(WORDS[i % 8] for i in range(n)) for n in src_words],
        [" ".join(WORDS[8 + i % 9] for i in range(n)) for n in tgt_words],
        name="toy",
    )


# ---------------------------------------------------------------------- encode_pairs
def test_short_pairs_are_untouched(tok: Tokenizer) -> None:
    corpus = corpus_of([2, 3], [3, 1])
    encoded = encode_pairs(corpus, tok, tok, max_len=64)
    assert [(tok.decode(s), tok.decode(t)) for s, t in encoded] == corpus.pairs()
    assert (encoded.num_truncated, encoded.num_filtered, encoded.num_empty) == (0, 0, 0)
    assert encoded.lengths == [(len(s), len(t)) for s, t in encoded]


def test_long_pairs_are_truncated_and_counted(tok: Tokenizer, caplog) -> None:
    corpus = corpus_of([2, 40, 3, 2], [2, 2, 40, 2])
    with caplog.at_level(logging.WARNING):
        encoded = encode_pairs(corpus, tok, tok, max_len=10)
    assert len(encoded) == 4 and encoded.num_truncated == 2
    # every source fits max_len positions, every target max_len - 1 (BOS/EOS takes one)
    assert all(len(s) <= 10 and len(t) <= 9 for s, t in encoded)
    assert max(len(s) for s in encoded.src) == 10 and max(len(t) for t in encoded.tgt) == 9
    assert "truncated 2 of 4 pairs to max_len=10" in caplog.text


def test_long_pairs_are_filtered_and_counted(tok: Tokenizer, caplog) -> None:
    corpus = corpus_of([2, 40, 3, 2], [2, 2, 40, 2])
    with caplog.at_level(logging.WARNING):
        encoded = encode_pairs(corpus, tok, tok, max_len=10, on_long="filter")
    assert (len(encoded), encoded.num_filtered) == (2, 2)
    assert [tok.decode(s) for s in encoded.src] == [corpus.src[0], corpus.src[3]]
    assert "dropped 2 of 4 pairs longer than max_len=10" in caplog.text


def test_bad_options(tok: Tokenizer) -> None:
    with pytest.raises(ValueError, match="on_long"):
        encode_pairs(corpus_of([1], [1]), tok, tok, max_len=8, on_long="crop")
    with pytest.raises(ValueError, match="max_len"):
        encode_pairs(corpus_of([1], [1]), tok, tok, max_len=1)


def test_long_sentences_never_overflow_the_embedding(tok: Tokenizer) -> None:
    """A model with max_len positions takes every batch encode_pairs makes, however long the text."""
    cfg = ModelConfig.tiny(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size).replace(
        max_len=12
    )
    model = Transformer(cfg).eval()
    too_long = corpus_of([200, 5, 30], [7, 300, 30])
    with pytest.raises(ValueError, match="exceeds max_len"):  # what the raw text would do
        model(collate_sources([tok.encode(too_long.src[0])]), torch.tensor([[BOS_ID]]))
    encoded = encode_pairs(too_long, tok, tok, max_len=cfg.max_len)
    batch = collate_pairs(list(encoded))
    assert batch.src.size(1) <= cfg.max_len and batch.tgt_in.size(1) <= cfg.max_len
    logits = model(batch.src, batch.tgt_in)
    logits = getattr(logits, "logits", logits)
    assert logits.shape == (3, batch.tgt_in.size(1), tok.vocab_size)


# ---------------------------------------------------------------------- collation
def test_collate_pairs_layout() -> None:
    batch = collate_pairs([([5, 6, 7], [8]), ([9], [10, 11, 12])])
    assert batch.src.tolist() == [[5, 6, 7], [9, PAD_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, PAD_ID, PAD_ID], [BOS_ID, 10, 11, 12]]
    assert batch.tgt_out.tolist() == [[8, EOS_ID, PAD_ID, PAD_ID], [10, 11, 12, EOS_ID]]
    assert (batch.num_src_tokens, batch.num_tgt_tokens) == (4, 6)
    assert batch.num_tgt_tokens == int((batch.tgt_out != PAD_ID).sum())
    assert batch.src.dtype == batch.tgt_in.dtype == torch.long and len(batch) == 2


def test_collate_sources_matches_collate_pairs() -> None:
    pairs = [([5, 6, 7], [8]), ([9], [10])]
    assert torch.equal(collate_sources([s for s, _ in pairs]), collate_pairs(pairs).src)
    with pytest.raises(ValueError):
        collate_pairs([])


# ---------------------------------------------------------------------- the sampler
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


def test_works_as_a_dataloader_batch_sampler(tok: Tokenizer) -> None:
    encoded = encode_pairs(corpus_of([1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]), tok, tok, max_len=32)
    sampler = TokenBatchSampler(encoded.lengths, max_tokens=40, seed=1)
    loader = DataLoader(encoded, batch_sampler=sampler, collate_fn=collate_pairs)
    batches = list(loader)
    assert (
        sum(len(b) for b in batches)
        == 6
        == sum(b.num_src_tokens > 0 for b in batches for _ in range(len(b)))
    )
    assert sum(b.num_tgt_tokens for b in batches) == sum(len(t) + 1 for t in encoded.tgt)


def test_encode_and_collate_classification() -> None:
    tok = Tokenizer.train(["good movie", "bad film", "great plot"] * 5, vocab_size=285)
    data = ClassificationData(["good movie " * 20, "bad"], [[1], [0]], ("neg", "pos"))
    encoded = encode_classification(data, tok, max_len=8)
    assert encoded.num_truncated == 1 and max(encoded.lengths) == 8
    assert len(encode_classification(data, tok, max_len=8, on_long="filter")) == 1
    batch = collate_classification(list(encoded), num_labels=2, multi_label=False)
    assert batch.tokens.shape == (2, 8) and batch.tokens[1, -1] == PAD_ID
    assert batch.targets.tolist() == [1, 0]
    multi = collate_classification([([5], [0, 2]), ([6, 7], [])], num_labels=3, multi_label=True)
    assert torch.equal(multi.targets, torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="exactly one label"):
        collate_classification([([5], [0, 1])], num_labels=2, multi_label=False)
