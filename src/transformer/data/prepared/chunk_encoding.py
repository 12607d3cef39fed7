"""The encode stage's work: line pairs read in chunks, each chunk encoded and filtered by a worker
process, handed back as flat id arrays in order.

Line pairs with an empty side are dropped (``empty``), as are pairs that encode to no tokens
(``empty_encoded``); with :class:`~transformer.data.prepared.request.Filters` (the training split)
a chunk also loses what ``max-len`` and ``ratio`` refuse and has its long sides cut by
``truncate``. ``dedup`` needs every chunk before it, so a chunk only brings its pairs' hashes and
the main process drops repeats. Memory: a chunk per worker in flight, two at most.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import deque
from collections.abc import Iterator
from multiprocessing import get_context
from typing import Any

import numpy as np

from transformer.data.prepared.request import Filters
from transformer.data.text_files import iter_file_lines
from transformer.errors import InputError

CHUNK_PAIRS = 4096
# why a line pair is left out, in the order the checks run (code 0 is "kept")
REASONS = ("empty", "empty_encoded", "max_len", "ratio", "dedup")


def iter_line_pairs(src: str, tgt: str) -> Iterator[tuple[str, str]]:
    """The line pairs of two aligned files, stripped; InputError naming the file and line where
    one ends before the other."""
    a, b = iter_file_lines(src), iter_file_lines(tgt)
    for number in itertools.count(1):
        x, y = next(a, None), next(b, None)
        if x is None and y is None:
            return
        if x is None or y is None:
            short, long = (src, tgt) if x is None else (tgt, src)
            raise InputError(f"{short} ends at line {number - 1} but {long} has a line {number}: "
                             "parallel files must have the same number of lines")
        yield x[1].strip(), y[1].strip()


def line_chunks(pairs: Iterator[tuple[str, str]],
                size: int) -> Iterator[tuple[list[str], list[str]]]:
    """``pairs`` in chunks of ``size``, each as (source lines, target lines)."""
    while True:
        block = list(itertools.islice(pairs, size))
        if not block:
            return
        yield [s for s, _ in block], [t for _, t in block]


# The worker processes' tokenizers and filters, set once by the pool's initializer (a process
# pool's per-process state; the main process encodes through the same function with its own).
_WORKER: dict[str, Any] = {}


def _init_worker(src_tok: Any, tgt_tok: Any, dtype: str) -> None:
    _WORKER.update(src=src_tok, tgt=tgt_tok, dtype=np.dtype(dtype))


def _flat(rows: list[list[int]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype, count=int(lengths.sum()))
    return ids, lengths


def encode_chunk(src: list[str], tgt: list[str], filters: Filters | None,
                 tag: tuple[str, int] | None = None) -> dict[str, np.ndarray]:
    """Encode and filter (``filters``; None: only empty pairs) one chunk of stripped line pairs
    with the worker's tokenizers; with ``tag`` (its text and id) every source row starts with that
    one id, which counts as a source token in the filters (never cut by ``truncate``).

    Returns ``reason`` (per pair: 0 kept, else 1 + the index in :data:`REASONS`, dedup excepted),
    ``truncated`` (per pair), the kept pairs' flat ids and lengths per side, and with dedup their
    ``hash`` (64 bits of blake2b over both texts).
    """
    src_tok, tgt_tok = _WORKER["src"], _WORKER["tgt"]
    dtype = _WORKER["dtype"]
    n = len(src)
    reason = np.zeros(n, dtype=np.int8)
    text = [i for i in range(n) if src[i] and tgt[i]]
    reason[[i for i in range(n) if not (src[i] and tgt[i])]] = 1
    s_ids = src_tok.encode_batch([src[i] for i in text]) if text else []
    t_ids = tgt_tok.encode_batch([tgt[i] for i in text]) if text else []
    prefix = f"{tag[0]} " if tag is not None else ""  # the tag is part of the pair for dedup
    kept: list[int] = []
    rows_s: list[list[int]] = []
    rows_t: list[list[int]] = []
    truncated = np.zeros(n, dtype=bool)
    for i, s, t in zip(text, s_ids, t_ids, strict=True):
        ls, lt = len(s), len(t)
        if not ls or not lt:
            reason[i] = 2
            continue
        if tag is not None:
            s = [tag[1], *s]
            ls += 1
        if filters is not None:
            if filters.max_len is not None and max(ls, lt) > filters.max_len:
                reason[i] = 3
                continue
            if filters.ratio is not None and max(ls, lt) > filters.ratio * min(ls, lt):
                reason[i] = 4
                continue
            if filters.truncate is not None and max(ls, lt) > filters.truncate:
                truncated[i] = True
                s, t = s[: filters.truncate], t[: filters.truncate]
        kept.append(i)
        rows_s.append(s)
        rows_t.append(t)
    out = {"reason": reason, "truncated": truncated, "kept": np.asarray(kept, dtype=np.int64)}
    out["src_ids"], out["src_len"] = _flat(rows_s, dtype)
    out["tgt_ids"], out["tgt_len"] = _flat(rows_t, dtype)
    if filters is not None and filters.dedup:
        out["hash"] = np.fromiter(
            (int.from_bytes(hashlib.blake2b(f"{len(prefix + src[i])}:{prefix}{src[i]}{tgt[i]}".encode(), digest_size=8)
                            .digest(), "little") for i in kept), dtype=np.uint64, count=len(kept))
    return out


class ChunkEncoder:
    """Runs :func:`encode_chunk` over chunks, in order, in a pool of ``workers`` processes (or
    here for one), with at most two chunks per worker in flight."""

    def __init__(self, workers: int, init: tuple[Any, ...]) -> None:
        self.workers = workers
        self.init = init
        self.pool = None
        if workers > 1:
            # spawn: a fork of a process that has started PyTorch's threads can hang
            self.pool = get_context("spawn").Pool(workers, initializer=_init_worker, initargs=init)
        else:
            _init_worker(*init)

    def run(self, chunks: Iterator[tuple[list[str], list[str]]], filters: Filters | None,
            tag: tuple[str, int] | None = None) -> Iterator[dict[str, np.ndarray]]:
        """:func:`encode_chunk`'s answer for each of ``chunks``, in their order."""
        if self.pool is None:
            for src, tgt in chunks:
                yield encode_chunk(src, tgt, filters, tag)
            return
        pending: deque = deque()
        for src, tgt in chunks:
            pending.append(self.pool.apply_async(encode_chunk, (src, tgt, filters, tag)))
            if len(pending) >= 2 * self.workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()

    def close(self) -> None:
        """Stop the worker processes (chunks still in flight are dropped)."""
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None
