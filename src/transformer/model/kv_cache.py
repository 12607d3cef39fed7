"""Key/value caches for incremental decoding.

Shapes: B batch (sentences x beams), H heads, L cached length, Dh head dimension.

A ``KVCache`` belongs to one attention layer. Self-attention appends the new step's keys and
values; cross-attention fills it once from the encoder memory and reuses it. Caches are passed to
the model explicitly (never stored on a module), so one model can decode many batches at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


class KVCache:
    """Growing key/value buffers of one attention layer, (B, H, L, Dh) each.

    Storage grows by doubling, so appending one step at a time costs amortised O(1) copies per
    step instead of concatenating the whole history every step.
    """

    def __init__(self) -> None:
        self._key: Tensor | None = None  # (B, H, capacity, Dh)
        self._value: Tensor | None = None  # (B, H, capacity, Dh)
        self.length = 0

    @property
    def is_empty(self) -> bool:
        return self.length == 0

    @property
    def key(self) -> Tensor:
        assert self._key is not None, "empty cache"
        return self._key[:, :, : self.length]  # (B, H, L, Dh)

    @property
    def value(self) -> Tensor:
        assert self._value is not None, "empty cache"
        return self._value[:, :, : self.length]  # (B, H, L, Dh)

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``key``/``value`` (B, H, T, Dh); return all cached keys and values (B, H, L+T, Dh)."""
        new = key.size(2)
        needed = self.length + new
        if self._key is None or needed > self._key.size(2):
            capacity = max(needed, 2 * (self._key.size(2) if self._key is not None else 8))
            b, h, _, dh = key.shape
            grown_k = key.new_empty(b, h, capacity, dh)
            grown_v = value.new_empty(b, h, capacity, dh)
            if self.length:
                grown_k[:, :, : self.length] = self.key
                grown_v[:, :, : self.length] = self.value
            self._key, self._value = grown_k, grown_v
        assert self._value is not None
        self._key[:, :, self.length : needed] = key
        self._value[:, :, self.length : needed] = value
        self.length = needed
        return self.key, self.value

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (B',) in that order: beam search's selection step."""
        if self._key is None:
            return
        assert self._value is not None
        if self._key.requires_grad or self._value.requires_grad:  # out= cannot record autograd
            self._key, self._value = self._key.index_select(0, index), self._value.index_select(0, index)
            return
        # Copy only the filled positions (storage can be up to twice as long): beam search does
        # this every step, so it is a large share of its memory traffic.
        key = self._key.new_empty(index.numel(), *self._key.shape[1:])
        value = self._value.new_empty(index.numel(), *self._value.shape[1:])
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

    def reorder(self, index: Tensor, *, cross: bool = True) -> None:
        """Select batch rows ``index`` (B',) in every layer (beam search).

        ``cross=False`` leaves the cross-attention caches alone: right when ``index`` only permutes
        rows that hold the same source (the beams of one sentence), since their cross-attention
        keys and values are equal; that saves copying them at every beam search step.
        """
        caches = (*self.self_attention, *self.cross_attention) if cross else self.self_attention
        for cache in caches:
            cache.reorder(index)

    def reset(self) -> None:
        for cache in (*self.self_attention, *self.cross_attention):
            cache.reset()
