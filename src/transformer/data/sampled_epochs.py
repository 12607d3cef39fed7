"""Training data whose subword encodings are sampled anew every epoch (``--subword-sampling``).

    data = SampledEpochs(encode, collate=collate_pairs, max_tokens=4096, seed=0)   # encode(seed)
    for batch in data.for_epoch(3): ...   # epoch 3's encodings and batches, the same every time

The text is read once; each epoch it is encoded again with SentencePiece's sampling from a seed
made of the run's seed and the epoch alone (:func:`epoch_seed`), then batched as
:class:`~transformer.data.epoch_batches.Epochs` batches it. So epoch e has the same encodings and
batches whenever it is asked for: a run resumed in the middle of an epoch sees the batches an
uninterrupted one would have, and every rank of a distributed run encodes alike and takes its own
share. Only the training side is sampled; validation is encoded once, deterministically.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from transformer.data.epoch_batches import Epochs

Item = TypeVar("Item")
BatchT = TypeVar("BatchT")


def epoch_seed(seed: int, epoch: int) -> int:
    """The sampling seed of ``epoch`` of a run of ``seed`` (a hash of both, below 2**31 so that
    the seed and the seed + 1 of a pair's second side both fit SentencePiece's 32 bits)."""
    digest = hashlib.blake2b(f"subword-sampling/{seed}/{epoch}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") >> 1


class SampledEpochs(Generic[Item, BatchT]):
    """Per epoch, ``encode(epoch_seed(seed, epoch))`` -> ``(items, widths, widest)`` (``widths``
    as :class:`Epochs` takes them, ``widest``: the positions the widest item takes in a batch),
    batched by token budget (``max_tokens``, raised to ``widest``; ``max_sentences``)
    and shuffled as :class:`Epochs` does, this ``rank``'s share. The last epoch's encodings are
    kept (a resume asks for its epoch once, the loop once more)."""

    def __init__(self, encode: Callable[[int], tuple[Sequence[Item], Sequence[Any], int]], *,
                 collate: Callable[[list[Item]], BatchT], max_tokens: int,
                 max_sentences: int | None = None, seed: int = 0, rank: int = 0,
                 world_size: int = 1) -> None:
        self.encode = encode
        self.collate = collate
        self.max_tokens, self.max_sentences = max_tokens, max_sentences
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self._last: tuple[int, Epochs[Item, BatchT]] | None = None

    def epochs_of(self, epoch: int) -> Epochs[Item, BatchT]:
        """The :class:`Epochs` over ``epoch``'s encodings."""
        if self._last is None or self._last[0] != epoch:
            items, widths, widest = self.encode(epoch_seed(self.seed, epoch))
            self._last = (epoch, Epochs(items, widths=widths, collate=self.collate,
                                        max_tokens=max(self.max_tokens, widest),
                                        max_sentences=self.max_sentences, seed=self.seed,
                                        rank=self.rank, world_size=self.world_size))
        return self._last[1]

    def for_epoch(self, epoch: int) -> Sequence[BatchT]:
        """The batches of ``epoch`` for this rank, in order."""
        return self.epochs_of(epoch).for_epoch(epoch)

    def __len__(self) -> int:
        """Batches per epoch on this rank, as the first epoch (0) has them: what a schedule
        planned in epochs counts with (a sampled epoch's count differs from another's by a few)."""
        return len(self.epochs_of(0))
