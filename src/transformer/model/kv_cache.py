"""Key/value caches for incremental decoding (the model's own, plain one).

Shapes: B batch, H heads, L cached length, T new positions, Dh head dimension.

A ``KVCache`` belongs to one attention layer. Self-attention appends the new positions' keys and
values and attends over all of them; cross-attention fills it once from the encoder memory and
reuses it. Caches are passed to the model explicitly (never stored on a module), so one model can
decode many batches at once. Beam search's grouped cache, which moves slot numbers instead of
keys, is part of the decoding fast path (:mod:`transformer.decoding.slot_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


class KVCache:
    """Growing key/value buffers (B, H, capacity, Dh) of one attention layer.

    Storage grows by doubling, so appending one step at a time costs amortised O(1) copies per
    step instead of concatenating the whole history every step.
    """

    def __init__(self) -> None:
        self._key: Tensor | None = None  # (B, H, capacity, Dh)
        self._value: Tensor | None = None
        self.length = 0

    @property
    def is_empty(self) -> bool:
        return self.length == 0

    @property
    def rows(self) -> int:
        """B, the batch rows cached (0 when empty)."""
        return 0 if self._key is None else self._key.size(0)

    @property
    def key(self) -> Tensor:
        """(B, H, L, Dh): the cached keys (a view of the storage)."""
        assert self._key is not None, "empty cache"
        return self._key[:, :, : self.length]

    @property
    def value(self) -> Tensor:
        """(B, H, L, Dh): the cached values (a view of the storage)."""
        assert self._value is not None, "empty cache"
        return self._value[:, :, : self.length]

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``key``/``value`` (B, H, T, Dh); return all cached keys and values (B, H, L+T, Dh)."""
        needed = self.length + key.size(2)
        if self._key is None or needed > self._key.size(2):
            self._grow(key, needed)
        assert self._key is not None and self._value is not None
        self._key[:, :, self.length : needed] = key
        self._value[:, :, self.length : needed] = value
        self.length = needed
        return self.key, self.value

    def _grow(self, key: Tensor, needed: int) -> None:
        """Storage for at least ``needed`` positions (doubling), keeping what is cached."""
        old = self._key.size(2) if self._key is not None else 8
        b, h, _, dh = key.shape
        grown_k = key.new_empty(b, h, max(needed, 2 * old), dh)  # (B, H, capacity, Dh)
        grown_v = torch.empty_like(grown_k)
        if self.length:
            grown_k[:, :, : self.length] = self.key
            grown_v[:, :, : self.length] = self.value
        self._key, self._value = grown_k, grown_v

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (B',) in that order (a finished row leaving, a beam chosen)."""
        if self._key is None or self._value is None:
            return
        if self._key.requires_grad or self._value.requires_grad:  # out= cannot record autograd
            self._key, self._value = self.key.index_select(0, index), self.value.index_select(0, index)
            return
        # Copy only the filled positions (storage can be up to twice as long).
        key = self._key.new_empty(index.numel(), *self._key.shape[1:])  # (B', H, capacity, Dh)
        value = torch.empty_like(key)
        torch.index_select(self.key, 0, index, out=key[:, :, : self.length])
        torch.index_select(self.value, 0, index, out=value[:, :, : self.length])
        self._key, self._value = key, value

    def reset(self) -> None:
        self._key = self._value = None
        self.length = 0


@dataclass
class DecoderCache:
    """Caches of every decoder layer: one for self-attention and one for cross-attention each."""

    self_attention: list[KVCache] = field(default_factory=list)
    cross_attention: list[KVCache] = field(default_factory=list)

    @classmethod
    def empty(cls, num_layers: int) -> DecoderCache:
        return cls(
            self_attention=[KVCache() for _ in range(num_layers)],
            cross_attention=[KVCache() for _ in range(num_layers)],
        )

    @property
    def length(self) -> int:
        """Target positions decoded so far (the offset of the next position)."""
        return self.self_attention[0].length if self.self_attention else 0

    def reorder(self, index: Tensor) -> None:
        """Select batch rows ``index`` (B',) in every cache of every layer."""
        for cache in (*self.self_attention, *self.cross_attention):
            cache.reorder(index)

    def reset(self) -> None:
        for cache in (*self.self_attention, *self.cross_attention):
            cache.reset()
