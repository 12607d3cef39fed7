"""One side of one corpus of a prepared data directory: its ids, offsets and lengths, written
row by row and read back through memory maps.

Read through ``numpy.memmap``, a corpus of millions of pairs costs its length files to open, and
every process on a machine (DDP ranks) shares the page cache instead of holding its own copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from transformer.data.prepared.layout import LENGTH_DTYPE, OFFSET_DTYPE
from transformer.errors import InputError


class ShardWriter:
    """Appends the id rows of one side of one corpus: ids, offsets and lengths, streamed to disk
    (nothing is kept in memory beyond the chunk being written)."""

    def __init__(self, folder: Path, side: str, dtype: np.dtype) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.dtype = dtype
        self._ids = open(folder / f"{side}.ids", "wb")  # noqa: SIM115 - closed in close()
        self._offsets = open(folder / f"{side}.offsets", "wb")  # noqa: SIM115
        self._lengths = open(folder / f"{side}.lengths", "wb")  # noqa: SIM115
        self._offsets.write(np.zeros(1, dtype=OFFSET_DTYPE).tobytes())
        self.rows = 0
        self.tokens = 0

    def append(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Add ``len(lengths)`` rows whose ids are ``ids`` (flat, row after row)."""
        if int(lengths.sum()) != len(ids):
            raise ValueError(f"{len(ids)} ids for rows of {int(lengths.sum())} tokens")
        self._ids.write(np.ascontiguousarray(ids, dtype=self.dtype).tobytes())
        ends = self.tokens + np.cumsum(lengths, dtype=np.int64)
        self._offsets.write(ends.astype(OFFSET_DTYPE).tobytes())
        self._lengths.write(np.asarray(lengths, dtype=LENGTH_DTYPE).tobytes())
        self.rows += len(lengths)
        self.tokens += len(ids)

    def close(self) -> None:
        for f in (self._ids, self._offsets, self._lengths):
            f.close()


def _memmap(path: Path, dtype: np.dtype, count: int) -> np.ndarray:
    """``count`` items of ``dtype`` from ``path``, memory-mapped; InputError when the file is
    missing or its size is not what the manifest says."""
    if not path.is_file():
        raise InputError(f"{path}: missing from the prepared data directory")
    size = path.stat().st_size
    if size != count * dtype.itemsize:
        raise InputError(f"{path}: {size} bytes, the manifest says {count} items of "
                         f"{dtype.itemsize} bytes; prepare the directory again")
    if count == 0:
        return np.zeros(0, dtype=dtype)
    # a plain ndarray view of the map (it keeps the map open): slicing np.memmap itself costs
    # several times more per pair, which a batch of hundreds of pairs pays
    return np.asarray(np.memmap(path, dtype=dtype, mode="r", shape=(count,)))


class Shard:
    """One side of one corpus, read back: row i is ``ids[offsets[i]:offsets[i+1]]``."""

    def __init__(self, folder: Path, side: str, *, rows: int, tokens: int, dtype: np.dtype) -> None:
        self.ids = _memmap(folder / f"{side}.ids", dtype, tokens)
        self.offsets = _memmap(folder / f"{side}.offsets", OFFSET_DTYPE, rows + 1)
        self.lengths = _memmap(folder / f"{side}.lengths", LENGTH_DTYPE, rows)
        if rows and (int(self.offsets[-1]) != tokens or int(self.offsets[0]) != 0):
            raise InputError(f"{folder / (side + '.offsets')}: offsets do not span the ids; "
                             "prepare the directory again")

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.ids[self.offsets[index] : self.offsets[index + 1]]


@dataclass
class PreparedCorpus:
    """One corpus of a split: its two sides and what the manifest says about it."""

    name: str
    src: Shard
    tgt: Shard
    info: dict[str, Any]

    def __len__(self) -> int:
        return len(self.src)
