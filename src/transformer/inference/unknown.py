"""Source pieces a model's vocabulary does not cover, found and counted so that none goes unseen.

A tokenizer trained without byte fallback (the demo's) encodes a character it never saw as
``<unk>``: the model cannot translate it, and before this module the translation simply lacked it.
``translate`` and ``evaluate`` wrap their input lines in :meth:`UnknownPieces.watch`, which logs one
warning per line holding such pieces (naming the characters) and counts them for ``--json``. On
the output side :meth:`transformer.data.tokenizer.Tokenizer.decode` shows an unknown piece as
SentencePiece's ``⁇``.

    unknown = UnknownPieces(translator.src_tokenizer, source="<stdin>")
    for translation in translator.stream(unknown.watch(lines)): ...
    unknown.lines   # {line number: unknown pieces}, only lines that have some
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from transformer.data.tokenizer import UNK_ID

log = logging.getLogger(__name__)


class UnknownPieces:
    """Checks input lines against ``tokenizer``; ``source`` names them in warnings (a file name,
    ``<stdin>``, ``argument``)."""

    def __init__(self, tokenizer: Any, *, source: str) -> None:
        self.tokenizer = tokenizer
        self.source = source
        self.lines: dict[int, int] = {}  # line number (from 1) -> its unknown pieces

    def check(self, number: int, line: str) -> int:
        """The unknown pieces of ``line`` (input line ``number``); a warning when there are any."""
        text = line.strip()
        count = self.tokenizer.encode(text).count(UNK_ID) if text else 0
        if count:
            self.lines[number] = count
            unseen = sorted({c for c in text if UNK_ID in self.tokenizer.encode(c)})
            log.warning("%s, line %d: %d piece%s not in the model's vocabulary (%s); translated "
                        "as <unk>", self.source, number, count, "" if count == 1 else "s",
                        " ".join(repr(c) for c in unseen) or "?")
        return count

    def watch(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines`` unchanged, each checked as it passes (lazily: a prompt or stdin stays live)."""
        for number, line in enumerate(lines, start=1):
            self.check(number, line)
            yield line
