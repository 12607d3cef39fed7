"""Beam search's self-attention cache, which moves slot numbers instead of keys.

Shapes: N sentences, G beams per sentence, B = N * G rows, H heads, L cached length, T new
positions, Dh head dimension.

Beam search picks, at every step, which beams of a sentence go on, and each chosen beam needs its
parent's history. Copying every cached position of every beam each step (what
:meth:`transformer.model.KVCache.reorder` does) costs memory traffic that grows with the length.
A :class:`SlotCache` instead keeps each sentence's G rows where they are and records, for every
beam and position, which of the sentence's G stored rows (its *slot*) holds that beam's key: keys
are never moved, only a small table of slots is. Attention then reads the sentence's keys once for
all its beams (:func:`transformer.decoding.kernels.attention_over_slots`). Tests check that it
gives every beam the history a plain cache gives it (tests/decoding/test_slot_cache.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.model.kv_cache import KVCache


class SlotCache:
    """Keys and values (N, H, capacity, G, Dh) and slots (N, G, capacity): beam g of sentence n
    finds its key at position p in ``key[n, :, p, slots[n, g, p]]``. A new position is stored at
    each beam's own slot. Storage grows by doubling, like :class:`KVCache`'s."""

    def __init__(self, key: Tensor, value: Tensor, group: int) -> None:
        """From flat histories ``key``/``value`` (N * G, H, L, Dh), each row its own slot."""
        filled = key.size(2)
        self._key = _group_rows(key, group).contiguous()  # (N, H, L, G, Dh)
        self._value = _group_rows(value, group).contiguous()
        self._slots = torch.arange(group, device=key.device)[None, :, None].repeat(
            key.size(0) // group, 1, filled
        )  # (N, G, L)
        self.length = filled

    @property
    def groups(self) -> int:
        return self._slots.size(1)

    @property
    def rows(self) -> int:
        """B = N * G, the beams cached."""
        return self._key.size(0) * self.groups

    @property
    def key(self) -> Tensor:
        """(B, H, L, Dh): every beam's keys, gathered (a copy)."""
        return self._rows(self._key)

    @property
    def value(self) -> Tensor:
        """(B, H, L, Dh): every beam's values, gathered (a copy)."""
        return self._rows(self._value)

    def _rows(self, storage: Tensor) -> Tensor:
        filled = self.length
        n, h, _, g, dh = storage.shape
        index = self._slots[:, :, :filled].transpose(1, 2)  # (N, L, G)
        index = index[:, None, :, :, None].expand(n, h, filled, g, dh)  # (N, H, L, G, Dh)
        rows = storage[:, :, :filled].gather(3, index)  # (N, H, L, G, Dh): beam g's keys
        return rows.permute(0, 3, 1, 2, 4).reshape(n * g, h, filled, dh)  # (B, H, L, Dh)

    def grouped(self) -> tuple[Tensor, Tensor, Tensor]:
        """The storage as it is: keys and values (N, H, L * G, Dh), position-major (the G slots of
        position p are entries p * G ... p * G + G - 1), and slots (N, G, L)."""
        n, h, _, g, dh = self._key.shape
        filled = self.length
        return (
            self._key[:, :, :filled].reshape(n, h, filled * g, dh),  # a view: the prefix is contiguous
            self._value[:, :, :filled].reshape(n, h, filled * g, dh),
            self._slots[:, :, :filled],
        )

    def append(self, key: Tensor, value: Tensor) -> None:
        """Append ``key``/``value`` (B, H, T, Dh), each beam's at its own slot."""
        needed = self.length + key.size(2)
        if needed > self._key.size(2):
            self._grow(needed)
        g = self.groups
        self._key[:, :, self.length : needed] = _group_rows(key, g)
        self._value[:, :, self.length : needed] = _group_rows(value, g)
        self._slots[:, :, self.length : needed] = torch.arange(g, device=key.device)[:, None]
        self.length = needed

    def _grow(self, needed: int) -> None:
        n, h, old, g, dh = self._key.shape
        capacity = max(needed, 2 * old)
        filled = self.length
        key, value = self._key.new_empty(n, h, capacity, g, dh), self._value.new_empty(n, h, capacity, g, dh)
        slots = self._slots.new_empty(n, g, capacity)
        key[:, :, :filled], value[:, :, :filled] = self._key[:, :, :filled], self._value[:, :, :filled]
        slots[:, :, :filled] = self._slots[:, :, :filled]
        self._key, self._value, self._slots = key, value, slots

    def choose(self, selection: Selection) -> None:
        """Within sentences: move slot numbers, not keys (only sentences that leave or move are
        copied)."""
        filled = self.length
        if selection.sentences is not None:
            self._key = self._key[:, :, :filled].index_select(0, selection.sentences)
            self._value = self._value[:, :, :filled].index_select(0, selection.sentences)
            self._slots = self._slots[:, :, :filled].index_select(0, selection.sentences)
        assert selection.parents is not None
        slots = self._slots.new_empty(self._slots.shape)
        index = selection.parents[:, :, None].expand(-1, -1, filled)  # (N', G, L)
        slots[:, :, :filled] = self._slots[:, :, :filled].gather(1, index)
        self._slots = slots


def _group_rows(x: Tensor, group: int) -> Tensor:
    """(N * G, H, T, Dh) -> (N, H, T, G, Dh), a view: row n * G + g becomes slot g of row n."""
    b, h, t, dh = x.shape
    return x.view(b // group, group, h, t, dh).permute(0, 2, 3, 1, 4)


@dataclass(frozen=True)
class Selection:
    """A row selection ``index`` (B',) into groups of ``group`` rows, and for a cache already
    grouped so the same as a choice of sentences (``sentences`` (N',) old sentence of each new
    one, None when they are unchanged) and, within them, of slots (``parents`` (N', G))."""

    index: Tensor
    group: int
    sentences: Tensor | None = None
    parents: Tensor | None = None

    @classmethod
    def of(cls, index: Tensor, group: int, *, cache: KVCache | SlotCache) -> Selection:
        """The selection of ``index`` from ``cache`` (B rows before it)."""
        if group < 1 or index.numel() % group != 0:
            raise ValueError(f"a selection of {index.numel()} rows cannot be split into groups of {group}")
        if group == 1 or not isinstance(cache, SlotCache) or cache.groups != group:
            return cls(index, group)  # made by copying rows: nothing to split
        by_group = index.view(-1, group)  # (N', G)
        sentences = by_group[:, 0] // group  # (N',)
        if not bool((by_group // group == sentences[:, None]).all()):
            raise ValueError(f"group={group}: every run of {group} rows must select rows of one group")
        unchanged = sentences.numel() * group == cache.rows and bool(
            (sentences == torch.arange(sentences.numel(), device=index.device)).all()
        )
        return cls(index, group, None if unchanged else sentences, by_group % group)


def reorder(cache: KVCache | SlotCache, selection: Selection, *,
            flat: Callable[[], KVCache] = KVCache) -> KVCache | SlotCache:
    """``cache`` with the rows of ``selection``: a :class:`SlotCache` of ``selection.group`` beams
    per sentence when that is > 1 (slots chosen in place when it already is one), else a plain
    cache (the same one reordered, or a new one made by ``flat``). Either the same object,
    changed, or a new one."""
    g = selection.group
    if isinstance(cache, SlotCache) and cache.groups == g:
        cache.choose(selection)
        return cache
    if isinstance(cache, KVCache) and g == 1:
        cache.reorder(selection.index)
        return cache
    if cache.length == 0:
        return cache
    key, value = cache.key.index_select(0, selection.index), cache.value.index_select(0, selection.index)
    if g > 1:
        return SlotCache(key, value, g)
    rows = flat()
    rows.update(key, value)
    return rows
