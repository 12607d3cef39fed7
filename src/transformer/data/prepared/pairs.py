"""The pairs of a prepared split, fitted to a model's ``max_len`` positions as encoding fits
text, and read pair by pair from the memory maps."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from transformer.data.encoding import Pair
from transformer.data.prepared.shards import PreparedCorpus

log = logging.getLogger(__name__)


class PreparedPairs(Sequence[Pair]):
    """The pairs of a split's corpora, one after the other, fitted to a model of ``max_len``
    positions as :func:`~transformer.data.encoding.encode_pairs` fits them: a source longer than
    ``max_len`` or a target longer than ``max_len - 1`` is cut (``on_long="truncate"``) or left out
    (``"filter"``), counted in ``num_truncated``/``num_filtered``.

    ``self[i]`` is ``(src_ids, tgt_ids)`` as lists of ints, read from the memory maps;
    ``lengths`` is an (N, 2) array of (src_len, tgt_len) after the cut, ``corpus`` (N,) says which
    corpus each pair is from and ``sizes`` how many pairs each corpus has.
    """

    def __init__(self, corpora: list[PreparedCorpus], *, max_len: int, on_long: str,
                 name: str = "") -> None:
        if on_long not in ("truncate", "filter"):
            raise ValueError(f"on_long must be one of ('truncate', 'filter'), got {on_long!r}")
        self.corpora = corpora
        self.name = name
        self.max_src, self.max_tgt = max_len, max_len - 1
        parts, index, corpus = [], [], []
        self.num_truncated = self.num_filtered = 0
        for k, c in enumerate(corpora):
            src = np.asarray(c.src.lengths, dtype=np.int64)
            tgt = np.asarray(c.tgt.lengths, dtype=np.int64)
            long = (src > self.max_src) | (tgt > self.max_tgt)
            keep = np.arange(len(src))
            if on_long == "filter":
                keep = np.flatnonzero(~long)
                self.num_filtered += int(long.sum())
            else:
                self.num_truncated += int(long.sum())
            parts.append(np.stack([np.minimum(src[keep], self.max_src),
                                   np.minimum(tgt[keep], self.max_tgt)], axis=1))
            index.append(keep)
            corpus.append(np.full(len(keep), k, dtype=np.int16))
        self.lengths = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
        self._row = np.concatenate(index) if index else np.zeros(0, dtype=np.int64)
        self.corpus = np.concatenate(corpus) if corpus else np.zeros(0, dtype=np.int16)
        self.sizes = np.bincount(self.corpus, minlength=len(corpora))
        if self.num_truncated:
            log.warning("%s: truncated %d of %d pairs to max_len=%d", name, self.num_truncated,
                        len(self), max_len)
        if self.num_filtered:
            log.warning("%s: dropped %d pairs longer than max_len=%d", name, self.num_filtered,
                        max_len)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index):  # type: ignore[override]
        corpus = self.corpora[self.corpus[index]]
        row = self._row[index]
        src, tgt = corpus.src, corpus.tgt
        s0, s1 = src.offsets[row : row + 2].tolist()
        t0, t1 = tgt.offsets[row : row + 2].tolist()
        return (src.ids[s0 : min(s1, s0 + self.max_src)].tolist(),
                tgt.ids[t0 : min(t1, t0 + self.max_tgt)].tolist())

    @property
    def widths(self) -> np.ndarray:
        """Per pair ``max(src_len, tgt_len) + 1``: its cost per sentence in a batch."""
        return self.lengths.max(axis=1) + 1 if len(self) else np.zeros(0, dtype=np.int64)
