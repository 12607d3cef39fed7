"""Subword regularization (Kudo, 2018) that repeats: a unigram tokenizer's segmentations sampled
word by word from our own seeded generator.

    sampler = SegmentationSampler(tokenizer._sp, nbest=32)
    sampler.sample(["A man rides a horse."], alpha=0.1, seed=7)   # the same ids for the same seed

SentencePiece samples with ``enable_sampling=True`` from a generator it seeds per thread, and its
draws for one seed differ from one process to the next (measured with sentencepiece 0.2.3: the
same seed repeats within a process, not across two), so a resumed run could not repeat an uninterrupted one's
epochs. Here the draws are ours: a unigram model with whitespace splitting segments each
whitespace-separated word on its own (no piece crosses a word's start), so a sentence's sampled
segmentation is one segmentation per word. For each distinct word its ``nbest`` best
segmentations are asked of SentencePiece once (``nbest_encode``, deterministic) and scored as the
model scores them (the sum of the pieces' log-probabilities); each time the word occurs, one is
drawn with probability proportional to ``exp(alpha * score)``: Kudo's l-best sampling with
smoothing alpha, from ``numpy``'s PCG64 seeded by ``seed``, so the same seed gives the same ids on
any machine and in any process. A text whose word-by-word best segmentation is not the sentence's
own (a normalisation that joins words; none in practice) keeps its deterministic encoding.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

META = "\u2581"  # SentencePiece's visible space
NBEST = 32  # segmentations kept per word (Kudo 2018 samples among the 64 best; most words have fewer)


class SegmentationSampler:
    """Sampled encodings of texts with a unigram SentencePiece ``processor``; see the module."""

    def __init__(self, processor: Any, *, nbest: int = NBEST) -> None:
        self.sp = processor
        self.nbest = nbest
        # word -> (its segmentations, their model scores (K,) float64); texts -> whether they split
        self._words: dict[str, tuple[list[list[int]], np.ndarray]] = {}
        self._splits: dict[str, bool] = {}
        self._cumulative: dict[tuple[str, float], tuple[list[list[int]], list[float]]] = {}

    def _word(self, word: str) -> tuple[list[list[int]], np.ndarray]:
        found = self._words.get(word)
        if found is None:
            segmentations = [list(s) for s in self.sp.nbest_encode_as_ids(word, nbest_size=self.nbest)]
            scores = np.array([sum(self.sp.get_score(i) for i in s) for s in segmentations])
            found = self._words[word] = (segmentations, scores)
        return found

    def _splits_by_word(self, text: str, words: list[str]) -> bool:
        """Whether the best segmentations of ``words`` joined are the text's own encoding."""
        known = self._splits.get(text)
        if known is None:
            joined = [i for w in words for i in self._word(w)[0][0]] if words else []
            known = self._splits[text] = joined == list(self.sp.encode(text))
        return known

    def _choices(self, word: str, alpha: float) -> tuple[list[list[int]], list[float]]:
        """The word's segmentations and their cumulative sampling weights, normalised to end at
        1 (kept per alpha: a run samples with one)."""
        key = (word, alpha)
        found = self._cumulative.get(key)
        if found is None:
            segmentations, scores = self._word(word)
            weights = np.exp(alpha * (scores - scores.max()))
            found = self._cumulative[key] = (segmentations, (np.cumsum(weights) / weights.sum()).tolist())
        return found

    def sample(self, texts: Sequence[str], *, alpha: float, seed: int) -> list[list[int]]:
        """One sampled encoding per text (ids, no BOS/EOS), the same for the same ``seed``."""
        rng = np.random.default_rng(seed)
        out: list[list[int]] = []
        for text in texts:
            words = text.split()
            if not words or not self._splits_by_word(text, words):
                out.append(list(self.sp.encode(text)))
                continue
            ids: list[int] = []
            for word, u in zip(words, rng.random(len(words)).tolist(), strict=True):
                segmentations, cumulative = self._choices(word, alpha)
                pick = bisect.bisect_right(cumulative, u) if len(segmentations) > 1 else 0
                ids.extend(segmentations[min(pick, len(segmentations) - 1)])
            out.append(ids)
        return out


def model_type(serialized: bytes) -> str:
    """``unigram``, ``bpe``, ``word`` or ``char``: what a serialized SentencePiece model is."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(serialized)
    return sentencepiece_model_pb2.TrainerSpec.ModelType.Name(proto.trainer_spec.model_type).lower()


def sample_encodings(tokenizer: Any, sampler: SegmentationSampler, texts: Sequence[str], *,
                     alpha: float, seed: int) -> list[list[int]]:
    """Sampled encodings of ``texts`` by ``tokenizer`` (a unigram
    :class:`~transformer.data.tokenizer.Tokenizer`; ValueError for BPE, whose dropout has no
    seedable sampler here): each word's segmentation drawn among its best ones with probability
    proportional to ``p(segmentation) ** alpha`` from a generator of ``seed`` alone, so the
    same seed gives the same ids in any process. A text holding U+2581 is encoded as
    ``tokenizer.encode`` does."""
    kind = model_type(tokenizer.to_bytes())
    if kind != "unigram":
        raise ValueError(f"subword sampling draws a unigram tokenizer's segmentations; this one "
                         f"is {kind}")
    texts = list(texts)
    out = sampler.sample(texts, alpha=alpha, seed=seed)
    for i, text in enumerate(texts):
        if META in text:
            out[i] = tokenizer.encode(text)
    return out
