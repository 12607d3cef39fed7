"""The Trainer's training data from prepared pairs: per epoch, corpora mixed by weight, then cut
into this rank's token-budget batches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np

from transformer.data.encoding import Pair
from transformer.data.epoch_batches import ArrayBatches
from transformer.data.prepared.pairs import PreparedPairs
from transformer.data.token_batch_sampler import TokenBatchSampler

BatchT = TypeVar("BatchT")


def mixture(sizes: Sequence[int], weights: Sequence[float] | None, *, seed: int,
            epoch: int) -> np.ndarray | None:
    """The pair indices one epoch draws when corpora of ``sizes`` pairs (laid one after the
    other) are mixed by ``weights``; None without weights (every pair once).

    An epoch holds as many pairs as all corpora together, of which corpus k gives
    ``round(total * w_k / sum(w))``: every one of its pairs as often as that holds it whole, and
    the rest drawn without replacement (seeded by ``seed`` and the epoch, so a resumed run draws
    the same). A corpus weighed above its size is repeated, one below it is subsampled.
    """
    if weights is None:
        return None
    sizes = [int(s) for s in sizes]
    total = sum(sizes)
    share = np.asarray(weights, dtype=np.float64) / float(sum(weights))
    rng = np.random.default_rng([seed, epoch, 7])
    start = 0
    parts = []
    for size, w in zip(sizes, share, strict=True):
        want = int(round(total * w))
        if size and want:
            whole, rest = divmod(want, size)
            base = np.arange(start, start + size, dtype=np.int64)
            parts.append(np.tile(base, whole))
            if rest:
                parts.append(start + np.sort(rng.choice(size, rest, replace=False)))
        start += size
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class MixedEpochs(Generic[BatchT]):
    """The Trainer's training data from prepared pairs: per epoch this rank's token-budget
    batches, planned as arrays (:meth:`TokenBatchSampler.plan`), corpora mixed by ``weights``
    (:func:`mixture`).

    Without weights every pair is in every epoch exactly once and the batches are those of
    :class:`~transformer.data.epoch_batches.Epochs` over the same lengths and seed. With weights each
    epoch draws its pairs first, then plans them; the ranks draw alike (same seed and epoch), so
    together they still see each drawn pair exactly once.
    """

    def __init__(self, pairs: PreparedPairs, *, weights: Sequence[float] | None,
                 collate: Callable[[list[Pair]], BatchT], max_tokens: int,
                 max_sentences: int | None = None, seed: int = 0, rank: int = 0,
                 world_size: int = 1) -> None:
        if weights is not None and len(weights) != len(pairs.sizes):
            raise ValueError(f"{len(weights)} weights for {len(pairs.sizes)} corpora")
        self.pairs, self.weights, self.collate = pairs, weights, collate
        self.options = dict(max_tokens=max_tokens, max_sentences=max_sentences, shuffle=True,
                            seed=seed, rank=rank, world_size=world_size)
        self.seed = seed
        self._sampler = TokenBatchSampler(pairs.lengths, **self.options) if weights is None else None

    def drawn(self, epoch: int) -> np.ndarray:
        """The pair indices of ``epoch`` before batching (all pairs, once, without weights)."""
        chosen = mixture(self.pairs.sizes, self.weights, seed=self.seed, epoch=epoch)
        return np.arange(len(self.pairs)) if chosen is None else chosen

    def plan(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """This rank's batches of ``epoch`` as ``(pair indices, bounds)``."""
        if self._sampler is not None:
            self._sampler.set_epoch(epoch)
            return self._sampler.plan()
        chosen = self.drawn(epoch)
        sampler = TokenBatchSampler(self.pairs.lengths[chosen], **self.options)
        sampler.set_epoch(epoch)
        indices, bounds = sampler.plan()
        return chosen[indices], bounds

    def for_epoch(self, epoch: int) -> ArrayBatches[BatchT]:
        return ArrayBatches(*self.plan(epoch), self._collate)

    def _collate(self, indices: list[int]) -> BatchT:
        return self.collate([self.pairs[i] for i in indices])

    def __len__(self) -> int:
        """Batches per epoch on this rank (of epoch 0 when weights make it vary a little)."""
        return len(self.plan(0)[1]) - 1
