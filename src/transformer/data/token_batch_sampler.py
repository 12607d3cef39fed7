"""Token-budget batches bucketed by length, sharded across DDP ranks, and their padding figures.

A batch of n examples whose widest needs w positions costs ``n * w``: the padded size of its larger
tensor, padding included. :class:`TokenBatchSampler` keeps every batch within ``max_tokens`` by
that measure; :func:`padding_stats` says how much of the batches is padding.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from torch.utils.data import Sampler

log = logging.getLogger(__name__)


class TokenBatchSampler(Sampler[list[int]]):
    """Batches of example indices, bucketed by length and bounded by a token budget.

    ``lengths`` is either one int per example (its width: the positions it needs, BOS/EOS
    included) or one ``(src_len, tgt_len)`` pair per example (raw token counts, width
    ``max(src_len, tgt_len) + 1``; the pair is also used to group similar source and target
    lengths, which cuts padding). A batch of n examples whose widest is w costs ``n * w`` and never
    exceeds ``max_tokens`` (nor ``max_sentences`` examples, when given).

    Each epoch: examples are sorted by width (ties broken at random from ``seed`` and the epoch),
    cut greedily into batches, and the batches are shuffled (``shuffle=True``). The cut points
    depend only on the sorted widths, so the number of batches is the same every epoch.

    DDP: rank ``r`` of ``world_size`` takes every ``world_size``-th batch of the shared order.
    Every rank gets the same number of batches (so collective ops never hang) and no example goes
    to two ranks: when the batch count is not a multiple of ``world_size``, the largest batches are
    split in two until it is. Over an epoch the ranks together see every example exactly once.
    Only when that is impossible (every batch is down to one example, as with fewer examples than
    ranks) are ``num_repeated`` batches repeated, with a warning, as DistributedSampler does.
    """

    def __init__(
        self,
        lengths: Sequence[int] | Sequence[tuple[int, int]],
        *,
        max_tokens: int,
        max_sentences: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if not isinstance(max_tokens, int) or max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if max_sentences is not None and max_sentences <= 0:
            raise ValueError(f"max_sentences must be positive, got {max_sentences!r}")
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
        array = np.asarray(lengths, dtype=np.int64)
        if array.ndim == 2 and array.shape[1] == 2:
            self._src_len, self._tgt_len = array[:, 0], array[:, 1]
            self._width = np.maximum(self._src_len, self._tgt_len) + 1
        elif array.ndim == 1:
            self._width = array
            self._src_len = self._tgt_len = None
        else:
            raise ValueError(
                f"lengths must be ints or (src_len, tgt_len) pairs, got an array of shape {array.shape}"
            )
        if self._width.size and self._width.min() <= 0:
            raise ValueError(f"lengths must be positive, got {int(self._width.min())}")
        if self._width.size and self._width.max() > max_tokens:
            worst = int(self._width.argmax())
            raise ValueError(
                f"example {worst} needs {int(self._width[worst])} token positions, more than "
                f"max_tokens={max_tokens}; raise max_tokens or lower max_len"
            )
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self._sizes = self._batch_sizes()
        self.num_repeated = -len(self._sizes) % world_size if self._sizes else 0
        if self.num_repeated:
            log.warning(
                "%d batches of single examples cannot be shared evenly by %d ranks: "
                "%d batches are repeated each epoch",
                len(self._sizes),
                world_size,
                self.num_repeated,
            )

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose tie-breaking and batch order :meth:`__iter__` produces."""
        self.epoch = epoch

    def __len__(self) -> int:
        """Batches this rank yields per epoch (the same on every rank and every epoch)."""
        return -(-len(self._sizes) // self.world_size) if self._sizes else 0

    def _batch_sizes(self) -> list[int]:
        """Examples per batch, in sorted-width order, split so the count divides world_size."""
        widths = np.sort(self._width)
        sizes: list[int] = []
        count = 0
        cap = self.max_sentences or len(widths)
        for w in widths.tolist():
            # sorted ascending, so w is the widest of the batch if it joins
            if count and ((count + 1) * w > self.max_tokens or count == cap):
                sizes.append(count)
                count = 0
            count += 1
        if count:
            sizes.append(count)
        while len(sizes) % self.world_size and max(sizes, default=1) > 1:
            big = sizes.index(max(sizes))
            half = sizes[big] // 2
            sizes[big : big + 1] = [sizes[big] - half, half]
        return sizes

    def _order(self, rng: np.random.Generator) -> np.ndarray:
        """Example indices sorted by width (then source and target length), ties at random."""
        noise = rng.random(len(self._width)) if self.shuffle else np.arange(len(self._width))
        if self._src_len is None:
            return np.lexsort((noise, self._width))
        return np.lexsort((noise, self._tgt_len, self._src_len, self._width))

    def batches(self) -> list[list[int]]:
        """All batches of the current epoch in their shared order, before sharding."""
        if not self._sizes:
            return []
        rng = np.random.default_rng([self.seed, self.epoch])
        order = self._order(rng)
        bounds = np.cumsum(self._sizes)[:-1]
        batches = [chunk.tolist() for chunk in np.split(order, bounds)]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        # only when batches cannot be split further: repeat some so every rank gets as many
        batches.extend(batches[i % len(batches)] for i in range(self.num_repeated))
        return batches

    def plan(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's batches of the current epoch as two arrays, ``(indices, bounds)``: batch j
        is ``indices[bounds[j]:bounds[j + 1]]``. The same batches as ``list(self)``, in the same
        order, without a Python list per batch (a plan over millions of examples stays a few
        arrays)."""
        if not self._sizes:
            return np.empty(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
        rng = np.random.default_rng([self.seed, self.epoch])
        order = self._order(rng)  # drawn first, as in batches()
        sizes = np.asarray(self._sizes, dtype=np.int64)
        starts = np.cumsum(sizes) - sizes
        shared = rng.permutation(len(sizes)) if self.shuffle else np.arange(len(sizes))
        shared = np.concatenate([shared, shared[np.arange(self.num_repeated) % len(shared)]])
        mine = shared[self.rank :: self.world_size]
        bounds = np.zeros(len(mine) + 1, dtype=np.int64)
        np.cumsum(sizes[mine], out=bounds[1:])
        # position of each slot of this rank's plan in the sorted order
        slots = np.repeat(starts[mine] - bounds[:-1], sizes[mine]) + np.arange(bounds[-1])
        return order[slots], bounds

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.batches()[self.rank :: self.world_size]


@dataclass(frozen=True)
class PaddingStats:
    """Real and padded token counts of a set of batches (both tensors, src and tgt_out)."""

    num_batches: int
    src_tokens: int
    src_slots: int
    tgt_tokens: int
    tgt_slots: int

    @property
    def padding_share(self) -> float:
        """Share of all tensor slots (src and tgt) that hold padding."""
        slots = self.src_slots + self.tgt_slots
        return 1.0 - (self.src_tokens + self.tgt_tokens) / slots if slots else 0.0

    @property
    def src_padding_share(self) -> float:
        return 1.0 - self.src_tokens / self.src_slots if self.src_slots else 0.0

    @property
    def tgt_padding_share(self) -> float:
        return 1.0 - self.tgt_tokens / self.tgt_slots if self.tgt_slots else 0.0


def padding_stats(
    lengths: Sequence[tuple[int, int]], batches: Sequence[Sequence[int]]
) -> PaddingStats:
    """Padding of ``batches`` (lists of indices into ``lengths``, raw ``(src_len, tgt_len)``)
    as :func:`~transformer.data.collation.collate_pairs` would pad them, computed without building tensors."""
    array = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
    src_tokens = src_slots = tgt_tokens = tgt_slots = 0
    for indices in batches:
        rows = array[np.asarray(indices, dtype=np.int64)]
        src_tokens += int(rows[:, 0].sum())
        src_slots += len(rows) * int(rows[:, 0].max())
        tgt_tokens += int(rows[:, 1].sum()) + len(rows)
        tgt_slots += len(rows) * (int(rows[:, 1].max()) + 1)
    return PaddingStats(len(batches), src_tokens, src_slots, tgt_tokens, tgt_slots)
