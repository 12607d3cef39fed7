"""The Trainer's training data for any task: token-budget batches of similar length, reshuffled
each epoch, collated only when asked for.

    data = Epochs(encoded, widths=encoded.widths, collate=collate_pairs, max_tokens=4096, seed=0)
    for batch in data.for_epoch(3): ...          # the same batches every time epoch 3 is asked for
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np

from transformer.data.token_batch_sampler import TokenBatchSampler

Item = TypeVar("Item")
BatchT = TypeVar("BatchT")


class LazyBatches(Sequence[BatchT]):
    """A plan of index lists whose batches are collated on access, so an epoch's tensors are built
    one at a time and skipping to a resume position costs nothing."""

    def __init__(self, plan: list[list[int]], collate: Callable[[list[int]], BatchT]) -> None:
        self._plan, self._collate = plan, collate

    def __len__(self) -> int:
        return len(self._plan)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self._collate(p) for p in self._plan[index]]
        return self._collate(self._plan[index])


class ArrayBatches(Sequence[BatchT]):
    """A plan held as two arrays (see :meth:`TokenBatchSampler.plan`): batch j collates the items
    ``indices[bounds[j]:bounds[j + 1]]``, on access."""

    def __init__(self, indices: np.ndarray, bounds: np.ndarray,
                 collate: Callable[[list[int]], BatchT]) -> None:
        self._indices, self._bounds, self._collate = indices, bounds, collate

    def __len__(self) -> int:
        return len(self._bounds) - 1

    def batch_indices(self, index: int) -> list[int]:
        """The item indices of batch ``index``."""
        if not -len(self) <= index < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        index %= len(self)
        return self._indices[self._bounds[index] : self._bounds[index + 1]].tolist()

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self._collate(self.batch_indices(index))


class Epochs(Generic[Item, BatchT]):
    """Per epoch, this rank's token-budget batches of ``items`` (see :class:`TokenBatchSampler`).

    ``widths`` holds per item what the sampler budgets by: an int (positions the item needs) or a
    ``(src_len, tgt_len)`` pair. ``collate`` turns a list of items into a batch. The order of an
    epoch depends on ``seed`` and the epoch alone, so a resumed run sees the batches it would have.
    """

    def __init__(
        self,
        items: Sequence[Item],
        *,
        widths: Sequence[int] | Sequence[tuple[int, int]],
        collate: Callable[[list[Item]], BatchT],
        max_tokens: int,
        max_sentences: int | None = None,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if len(items) != len(widths):
            raise ValueError(f"{len(items)} items but {len(widths)} widths")
        self.items = items
        self.collate = collate
        self.sampler = TokenBatchSampler(
            widths, max_tokens=max_tokens, max_sentences=max_sentences, shuffle=True, seed=seed,
            rank=rank, world_size=world_size,
        )

    def for_epoch(self, epoch: int) -> Sequence[BatchT]:
        """The batches of ``epoch`` for this rank, in order."""
        self.sampler.set_epoch(epoch)
        return ArrayBatches(*self.sampler.plan(), self._collate)

    def _collate(self, indices: list[int]) -> BatchT:
        return self.collate([self.items[i] for i in indices])

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        return len(self.sampler)
