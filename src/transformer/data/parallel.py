"""Parallel text: two UTF-8 files (plain or gzip), one sentence a line, line i of one the
translation of line i of the other.

Reading keeps the pairs aligned whatever the files hold: different line counts are an error, and a
pair in which either side is empty (after stripping surrounding whitespace) is dropped as a pair and
counted, never shifted.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from transformer.data.text_files import iter_file_lines
from transformer.errors import InputError

log = logging.getLogger(__name__)


@dataclass
class ParallelCorpus:
    """Aligned sentence pairs: ``src[i]`` translates to ``tgt[i]``.

    ``name`` says where the pairs came from (file names or ``multi30k/train.en-de``);
    ``num_lines`` is how many line pairs were read and ``num_empty_dropped`` how many of them were
    dropped because one side or both were empty, so ``len(self) == num_lines - num_empty_dropped``
    for corpora read from files.
    """

    src: list[str]
    tgt: list[str]
    name: str = ""
    num_lines: int = 0
    num_empty_dropped: int = 0

    def __post_init__(self) -> None:
        if len(self.src) != len(self.tgt):
            raise ValueError(
                f"src and tgt must be aligned, got {len(self.src)} and {len(self.tgt)} sentences"
            )
        if self.num_lines == 0:
            self.num_lines = len(self.src)

    def __len__(self) -> int:
        return len(self.src)

    def pairs(self) -> list[tuple[str, str]]:
        """The corpus as a list of ``(src, tgt)`` string pairs."""
        return list(zip(self.src, self.tgt, strict=True))


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """All lines of a UTF-8 text file (plain or gzip), each stripped of surrounding whitespace.

    Empty lines are kept (as ``""``) so that line numbers stay meaningful; callers decide what an
    empty line means. Raises :class:`InputError` for a missing, empty, corrupt or non-UTF-8 file
    (naming the line and byte offset of the first bad byte).
    """
    return [text.strip() for _, text in iter_file_lines(path)]


def read_parallel(
    src_path: str | os.PathLike[str],
    tgt_path: str | os.PathLike[str],
    *,
    name: str | None = None,
) -> ParallelCorpus:
    """Read two aligned files into a :class:`ParallelCorpus`.

    Line pairs where either side is empty are dropped together and counted (logged at WARNING).
    Raises :class:`InputError` when the files have different line counts (naming both files and
    both counts), when either file is missing, empty, corrupt or not UTF-8, or when no non-empty
    pair is left.
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    src_lines = read_lines(src_path)
    tgt_lines = read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise InputError(
            f"parallel files differ in length: {src_path} has {len(src_lines)} lines but "
            f"{tgt_path} has {len(tgt_lines)}; line i of one must translate line i of the other"
        )
    src: list[str] = []
    tgt: list[str] = []
    first_empty = 0
    for number, (s, t) in enumerate(zip(src_lines, tgt_lines, strict=True), start=1):
        if s and t:
            src.append(s)
            tgt.append(t)
        elif not first_empty:
            first_empty = number
    dropped = len(src_lines) - len(src)
    if not src:
        raise InputError(
            f"{src_path} and {tgt_path}: no line pair has text on both sides "
            f"({len(src_lines)} lines read)"
        )
    if dropped:
        log.warning(
            "%s / %s: dropped %d line pairs with an empty side (first at line %d)",
            src_path,
            tgt_path,
            dropped,
            first_empty,
        )
    return ParallelCorpus(
        src,
        tgt,
        name=name if name is not None else f"{src_path} + {tgt_path}",
        num_lines=len(src_lines),
        num_empty_dropped=dropped,
    )
