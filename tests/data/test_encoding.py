"""Encoding: max_len handling (cut or drop, counted and logged) for both tasks, and the whole
translation pipeline: encode, token-budget batches, collation in a DataLoader."""

from __future__ import annotations

import logging

import pytest
import torch
from torch.utils.data import DataLoader

from transformer import ModelConfig, Transformer
from transformer.data.classification import ClassificationData
from transformer.data.collation import collate_classification, collate_pairs, collate_sources
from transformer.data.encoding import encode_classification, encode_pairs
from transformer.data.parallel import ParallelCorpus
from transformer.data.token_batch_sampler import TokenBatchSampler
from transformer.data.tokenizer import BOS_ID, PAD_ID, Tokenizer

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


# ---------------------------------------------------------------------- the pipeline
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
