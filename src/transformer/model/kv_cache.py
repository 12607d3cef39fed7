"""Key/value caches for incremental decoding.

Shapes: B batch (sentences x beams), H heads, L cached length, Dh head dimension; in beam search
B = N * G: N sentences of G beams each.

A ``KVCache`` belongs to one attention layer. Self-attention appends the new step's keys and
values; cross-attention fills it once from the encoder memory and reuses it. Caches are passed to
the model explicitly (never stored on a module), so one model can decode many batches at once.

Beam search picks, at every step, which beams of a sentence go on, and each chosen beam needs its
parent's history. Copying every cached position of every beam each step (what
``index_select`` on the whole cache does) costs memory traffic that grows with the length. A
cache reordered with ``group=G`` instead keeps each sentence's G rows where they are and records,
for every beam and position, which of the sentence's G stored rows (its *slot*) holds that
beam's key: keys are never moved, only a small table of slots is. Attention then reads the
sentence's keys once for all its beams (:func:`transformer.model.attention.attention_over_slots`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


class KVCache:
    """Growing key/value buffers of one attention layer.

    Storage grows by doubling, so appending one step at a time costs amortised O(1) copies per
    step instead of concatenating the whole history every step. Two layouts:

    - flat: keys and values (B, H, capacity, Dh), row b holding batch row b's history;
    - grouped (after ``reorder(index, group=G)``, G > 1): keys and values (N, H, capacity, G, Dh)
      and slots (N, G, capacity): beam g of sentence n finds its key at position p in
      ``key[n, :, p, slots[n, g, p]]``. A new position is stored at each beam's own slot.

    ``key``/``value`` give the (B, H, L, Dh) histories row by row in either layout (gathered, so
    a copy, in the grouped one); :meth:`grouped` gives the grouped layout's storage as it is.
    """

    def __init__(self) -> None:
        self._key: Tensor | None = None  # (B, H, capacity, Dh) or (N, H, capacity, G, Dh)
        self._value: Tensor | None = None
        self._slots: Tensor | None = None  # (N, G, capacity) long, grouped layout only
        self.length = 0

    @property
    def is_empty(self) -> bool:
        return self.length == 0

    @property
    def groups(self) -> int:
        """G, the rows (beams) per stored row: 1 in the flat layout."""
        return 1 if self._slots is None else self._slots.size(1)

    @property
    def key(self) -> Tensor:
        """(B, H, L, Dh): every row's cached keys."""
        assert self._key is not None, "empty cache"
        return self._rows(self._key)

    @property
    def value(self) -> Tensor:
        """(B, H, L, Dh): every row's cached values."""
        assert self._value is not None, "empty cache"
        return self._rows(self._value)

    def grouped(self) -> tuple[Tensor, Tensor, Tensor]:
        """The grouped layout as stored: keys and values (N, H, L * G, Dh), position-major (the
        G slots of position p are entries p * G ... p * G + G - 1), and slots (N, G, L)."""
        assert self._key is not None and self._value is not None and self._slots is not None
        n, h, _, g, dh = self._key.shape
        filled = self.length
        return (
            self._key[:, :, :filled].reshape(n, h, filled * g, dh),  # a view: the prefix is contiguous
            self._value[:, :, :filled].reshape(n, h, filled * g, dh),
            self._slots[:, :, :filled],
        )

    def _rows(self, storage: Tensor) -> Tensor:
        """Storage in either layout -> (B, H, L, Dh) per row."""
        filled = self.length
        if self._slots is None:
            return storage[:, :, :filled]
        n, h, _, g, dh = storage.shape
        index = self._slots[:, :, :filled].transpose(1, 2)  # (N, L, G)
        index = index[:, None, :, :, None].expand(n, h, filled, g, dh)  # (N, H, L, G, Dh)
        rows = storage[:, :, :filled].gather(3, index)  # (N, H, L, G, Dh): beam g's keys
        return rows.permute(0, 3, 1, 2, 4).reshape(n * g, h, filled, dh)

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``key``/``value`` (B, H, T, Dh); return all cached keys and values (B, H, L+T, Dh)."""
        self.append(key, value)
        return self.key, self.value

    def append(self, key: Tensor, value: Tensor) -> None:
        """Append ``key``/``value`` (B, H, T, Dh) to the cache."""
        new = key.size(2)
        needed = self.length + new
        if self._key is None or needed > self._key.size(2):
            self._grow(key, needed)
        assert self._key is not None and self._value is not None
        if self._slots is None:
            self._key[:, :, self.length : needed] = key
            self._value[:, :, self.length : needed] = value
        else:
            n, _, _, g, _ = self._key.shape
            self._key[:, :, self.length : needed] = _group_rows(key, g)
            self._value[:, :, self.length : needed] = _group_rows(value, g)
            self._slots[:, :, self.length : needed] = torch.arange(g, device=key.device)[:, None]
        self.length = needed

    def _grow(self, key: Tensor, needed: int) -> None:
        """Storage for at least ``needed`` positions (doubling), keeping what is cached."""
        old = self._key.size(2) if self._key is not None else 8
        capacity = max(needed, 2 * old)
        if self._slots is None:
            b, h, _, dh = key.shape
            shape: tuple[int, ...] = (b, h, capacity, dh)
        else:
            assert self._key is not None
            n, h, _, g, dh = self._key.shape
            shape = (n, h, capacity, g, dh)
            slots = self._slots.new_empty(n, g, capacity)
            slots[:, :, : self.length] = self._slots[:, :, : self.length]
            self._slots = slots
        grown_k, grown_v = key.new_empty(shape), key.new_empty(shape)
        if self.length:
            assert self._key is not None and self._value is not None
            grown_k[:, :, : self.length] = self._key[:, :, : self.length]
            grown_v[:, :, : self.length] = self._value[:, :, : self.length]
        self._key, self._value = grown_k, grown_v

    def reorder(self, index: Tensor, *, group: int = 1) -> None:
        """Keep batch rows ``index`` (B',) in that order: beam search's selection step.

        ``group=G`` > 1 asks for the grouped layout, rows n * G ... n * G + G - 1 being the G beams
        of sentence n. A cache already grouped by G then records the choice instead of copying
        keys (see the module docstring); every run of G consecutive entries of ``index`` must then
        select rows of one sentence (a ValueError otherwise). Any other cache is copied into the
        grouped layout.
        """
        self._reorder(_Selection.of(index, group, rows=self.rows, grouped=self.groups == group))

    @property
    def rows(self) -> int:
        """B, the batch rows cached (0 when empty)."""
        if self._key is None:
            return 0
        return self._key.size(0) * self.groups

    def _reorder(self, selection: _Selection) -> None:
        if self._key is None:
            return
        assert self._value is not None
        g = selection.group
        if self._key.requires_grad or self._value.requires_grad:  # out= cannot record autograd
            key, value = self.key.index_select(0, selection.index), self.value.index_select(0, selection.index)
            self._key, self._value, self._slots = key, value, None
        elif g > 1 and self.groups == g:
            self._choose_slots(selection)
        else:
            key, value = self._selected_rows(selection.index)
            if g == 1:
                self._key, self._value, self._slots = key, value, None
            else:
                self._regroup(key, value, g)

    def _choose_slots(self, selection: _Selection) -> None:
        """Grouped layout, within sentences: move slot numbers, not keys (only sentences that
        leave or move are copied)."""
        assert self._key is not None and self._value is not None and self._slots is not None
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

    def _selected_rows(self, index: Tensor) -> tuple[Tensor, Tensor]:
        """Rows ``index`` of the keys and values, flat: (B', H, capacity or L, Dh) each."""
        assert self._key is not None and self._value is not None
        if self._slots is not None:
            return self.key.index_select(0, index), self.value.index_select(0, index)
        # Copy only the filled positions (storage can be up to twice as long).
        key = self._key.new_empty(index.numel(), *self._key.shape[1:])
        value = self._value.new_empty(index.numel(), *self._value.shape[1:])
        torch.index_select(self.key, 0, index, out=key[:, :, : self.length])
        torch.index_select(self.value, 0, index, out=value[:, :, : self.length])
        return key, value

    def _regroup(self, key: Tensor, value: Tensor, group: int) -> None:
        """Flat rows (N * G, H, >= L, Dh) into the grouped layout, each row its own slot."""
        filled = self.length
        self._key = _group_rows(key[:, :, :filled], group).contiguous()  # (N, H, L, G, Dh)
        self._value = _group_rows(value[:, :, :filled], group).contiguous()
        self._slots = torch.arange(group, device=key.device)[None, :, None].repeat(
            key.size(0) // group, 1, filled
        )

    def reset(self) -> None:
        self._key = self._value = self._slots = None
        self.length = 0


def _group_rows(x: Tensor, group: int) -> Tensor:
    """(N * G, H, T, Dh) -> (N, H, T, G, Dh), a view: row n * G + g becomes slot g of row n."""
    b, h, t, dh = x.shape
    return x.view(b // group, group, h, t, dh).permute(0, 2, 3, 1, 4)


@dataclass(frozen=True)
class _Selection:
    """A row selection ``index`` (B',), and for ``group`` G > 1 the same as a choice of sentences
    (``sentences`` (N',) old sentence of each new one, None when they are unchanged) and, within
    them, of slots (``parents`` (N', G))."""

    index: Tensor
    group: int
    sentences: Tensor | None = None
    parents: Tensor | None = None

    @classmethod
    def of(cls, index: Tensor, group: int, *, rows: int, grouped: bool) -> _Selection:
        """``rows``: B before the selection; ``grouped``: whether the cache already holds groups
        of ``group`` rows (otherwise the selection is made by copying, and nothing is split)."""
        if group < 1 or index.numel() % group != 0:
            raise ValueError(f"a selection of {index.numel()} rows cannot be split into groups of {group}")
        if group == 1 or not grouped:
            return cls(index, group)
        by_group = index.view(-1, group)  # (N', G)
        sentences = by_group[:, 0] // group  # (N',)
        if not bool((by_group // group == sentences[:, None]).all()):
            raise ValueError(f"group={group}: every run of {group} rows must select rows of one group")
        unchanged = sentences.numel() * group == rows and bool(
            (sentences == torch.arange(sentences.numel(), device=index.device)).all()
        )
        return cls(index, group, None if unchanged else sentences, by_group % group)


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
        self.reorder_self(index)
        self.reorder_cross(index)

    def reorder_self(self, index: Tensor, *, group: int = 1) -> None:
        """Select batch rows ``index`` (B',) in the self-attention caches only: beam search's
        selection step, where the cross-attention caches hold one row per sentence shared by all
        its beams (see :class:`transformer.model.MultiHeadAttention`) and change only when
        sentences leave the batch. ``group`` works as in :meth:`KVCache.reorder`."""
        if not self.self_attention:
            return
        first = self.self_attention[0]
        selection = _Selection.of(index, group, rows=first.rows, grouped=first.groups == group)
        for cache in self.self_attention:
            cache._reorder(selection)

    def reorder_cross(self, index: Tensor) -> None:
        """Select batch rows ``index`` in the cross-attention caches only."""
        for cache in self.cross_attention:
            cache.reorder(index)

    def reset(self) -> None:
        for cache in (*self.self_attention, *self.cross_attention):
            cache.reset()
