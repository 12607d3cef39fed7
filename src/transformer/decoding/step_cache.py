"""The self-attention cache of the decoding fast path, stored position-major.

Shapes: B rows (sentences x beams), H heads, L cached length, T new positions, Dh head
dimension, D = H * Dh.

A cached decoding step adds one position to every row. The model's
:class:`~transformer.model.KVCache` keeps (B, H, capacity, Dh) keys and values, so a step writes
2 x B x H separate pieces with two indexed assignments. A :class:`StepCache` keeps one
(capacity, B, 2, H, Dh) storage: the keys and values of a position are one contiguous (B, 2 * D)
block, exactly the last two thirds of the fused Q/K/V projection's output row, so a step appends
them with one copy (:meth:`StepCache.append_rows`). Attention reads the keys and values as strided
(B, H, L, Dh) views, which ``F.scaled_dot_product_attention`` takes without copying. Tests check it
against :class:`~transformer.model.KVCache` (tests/decoding/test_step_cache.py).
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer.model.kv_cache import KVCache

INITIAL_CAPACITY = 16  # positions; storage grows by doubling


class StepCache(KVCache):
    """Keys and values of one self-attention layer: storage (capacity, B, 2, H, Dh). A
    :class:`~transformer.model.KVCache` whose ``key``/``value`` (B, H, L, Dh) are strided views
    of that storage."""

    def __init__(self, *, heads: int) -> None:
        super().__init__()
        self.heads = heads  # H
        self._storage: Tensor | None = None  # (capacity, B, 2, H, Dh); _key/_value view it
        self._positions: tuple[Tensor, ...] = ()  # (B, 2 * D) views, one per position
        self._spare: tuple[Tensor, Tensor, Tensor, tuple[Tensor, ...]] | None = None  # see reorder

    def append_rows(self, kv: Tensor) -> tuple[Tensor, Tensor]:
        """Append one position: ``kv`` (B, 2 * D), each row its key then its value (heads in
        order, as the fused projection lays them out). Returns all keys and values (B, H, L, Dh)."""
        if self._storage is None or self.length == self._storage.size(0):
            self._grow_to(kv, self.length + 1)
        self._positions[self.length].copy_(kv)
        self.length += 1
        return self.key, self.value

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``key``/``value`` (B, H, T, Dh), as :meth:`transformer.model.KVCache.update`."""
        b, h, t, dh = key.shape
        if h != self.heads:
            raise ValueError(f"a StepCache of {self.heads} heads got keys of {h} heads")
        kv = torch.stack([key, value], dim=1).permute(3, 0, 1, 2, 4)  # (T, B, 2, H, Dh)
        needed = self.length + t
        if self._storage is None or needed > self._storage.size(0):
            self._grow_to(kv.reshape(t, b, 2 * h * dh)[0], needed)
        assert self._storage is not None
        self._storage[self.length : needed] = kv
        self.length = needed
        return self.key, self.value

    def _grow_to(self, like: Tensor, needed: int) -> None:
        """Storage for at least ``needed`` positions (doubling), keeping what is cached;
        ``like`` (B, 2 * D) gives the rows, width, dtype and device."""
        old = self._storage.size(0) if self._storage is not None else INITIAL_CAPACITY // 2
        b, width = like.shape
        dh = width // (2 * self.heads)
        storage = like.new_empty(max(needed, 2 * old), b, 2, self.heads, dh)
        if self.length:
            assert self._storage is not None
            storage[: self.length] = self._storage[: self.length]
        self._set(storage)

    def _set(self, storage: Tensor) -> None:
        self._storage = storage
        # views made once per storage, not once per step: keys and values (B, H, capacity, Dh)
        # and each position's (B, 2 * D) block
        self._key, self._value = storage.permute(2, 1, 3, 0, 4).unbind(0)
        self._positions = storage.flatten(2).unbind(0)

    def reorder(self, index: Tensor) -> None:
        """Keep rows ``index`` (B',) in that order (finished rows leaving; a beam chosen).

        The rows are copied into a second storage, and the two storages (with their views) swap
        roles: beam search reorders every step, and neither storage nor views are made anew while
        the rows and capacity stay the same."""
        if self._storage is None:
            return
        shape = (self._storage.size(0), index.numel(), *self._storage.shape[2:])
        current = (self._storage, self._key, self._value, self._positions)
        if self._spare is not None and self._spare[0].shape == shape:
            target = self._spare[0]
            self._storage, self._key, self._value, self._positions = self._spare
        else:
            target = self._storage.new_empty(shape)
            self._set(target)
        torch.index_select(current[0][: self.length], 1, index, out=target[: self.length])
        self._spare = current  # type: ignore[assignment]

    def reset(self) -> None:
        self._storage = self._key = self._value = self._spare = None
        self._positions = ()
        self.length = 0
