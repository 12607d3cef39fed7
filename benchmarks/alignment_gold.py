"""Reference alignments for benchmarks/alignment.py, and the alignment error rate.

- The demo task (English number words -> German, transformer.data.builtin_task) has a known
  alignment, built here beside the text: German writes a number as one word, so its units are its
  morphemes ("fünf|und|vierzig|tausend") and the English side's are its words split at hyphens
  ("forty-five" -> "forty", "five"). Each German morpheme is surely aligned to the English word it
  translates ("fünf"-"five", "vierzig"-"forty", "hundert"-"hundred", "dreizehn"-"thirteen"), and
  "und", which English does not write, possibly to the tens and the units it joins. The German
  units come before the tens, so a monotone (diagonal) guess is wrong inside every group.
- Multi30k has no gold alignment: the silver one is eflomal's (Östling and Tiedemann, 2016),
  trained on the training split and the test split together, lowercased, in both directions;
  their intersection is taken as sure, their union as possible.

AER (Och and Ney, 2003) = 1 - (|A & S| + |A & P|) / (|A| + |S|), summed over the corpus.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from transformer.data.builtin_task import (
    DE_ONES,
    DE_TEENS,
    DE_TENS,
    EN_ONES,
    EN_TENS,
    english_number,
    german_number,
)

Links = set[tuple[int, int]]  # (source unit, target unit)


class _Builder:
    """English words and German morphemes in their own orders, with the links between them."""

    def __init__(self) -> None:
        self.en: list[str] = []
        self.de: list[str] = []
        self.sure: Links = set()
        self.possible: Links = set()

    def word(self, text: str) -> int:
        self.en.append(text)
        return len(self.en) - 1

    def morpheme(self, text: str, *sure: int, possible: Sequence[int] = ()) -> None:
        j = len(self.de)
        self.de.append(text)
        self.sure.update((i, j) for i in sure)
        self.possible.update((i, j) for i in (*sure, *possible))

    def group(self, n: int, *, final: bool) -> None:
        """1..999 as English words and German morphemes (builtin_task's spelling rules)."""
        hundreds, rest = divmod(n, 100)
        if hundreds:
            digit, hundred = self.word(EN_ONES[hundreds]), self.word("hundred")
            self.morpheme("ein" if hundreds == 1 else DE_ONES[hundreds], digit)
            self.morpheme("hundert", hundred)
        if not rest:
            return
        if rest < 20:
            one = self.word(EN_ONES[rest])
            if rest == 1:
                self.morpheme("eins" if final else "ein", one)
            else:
                self.morpheme(DE_ONES[rest] if rest < 10 else DE_TEENS[rest - 10], one)
            return
        tens, ones = divmod(rest, 10)
        ten = self.word(EN_TENS[tens])
        if ones:  # German: units, "und", tens
            one = self.word(EN_ONES[ones])
            self.morpheme("ein" if ones == 1 else DE_ONES[ones], one)
            self.morpheme("und", possible=(one, ten))
        self.morpheme(DE_TENS[tens], ten)


def number_alignment(n: int) -> tuple[list[str], list[str], Links, Links]:
    """English units, German units, sure and possible links of the number ``n`` (1..999,999)."""
    b = _Builder()
    thousands, rest = divmod(n, 1000)
    if thousands:
        b.group(thousands, final=False)
        b.morpheme("tausend", b.word("thousand"))
    if rest:
        b.group(rest, final=True)
    assert "".join(b.de) == german_number(n), (n, b.de)
    assert re.split(r"[\s-]+", english_number(n)) == b.en, (n, b.en)
    return b.en, b.de, b.sure, b.possible


def unit_spans(text: str, units: Sequence[str]) -> list[tuple[int, int]]:
    """Where each of ``units`` (in order) lies in ``text``, in non-space characters (the
    coordinates of transformer.inference.alignment); characters between units belong to none."""
    solid = "".join(text.split())
    spans, at = [], 0
    for unit in units:
        start = solid.index(unit, at)
        spans.append((start, start + len(unit)))
        at = start + len(unit)
    return spans


def eflomal_links(sources: Sequence[str], targets: Sequence[str], *,
                  keep: Iterable[int]) -> list[tuple[Links, Links]]:
    """(sure, possible) silver links of the pairs ``keep`` (indices), from eflomal trained on all
    the pairs (lowercased whitespace words) in both directions: sure = both agree, possible =
    either."""
    import tempfile
    from pathlib import Path

    from eflomal import Aligner

    with tempfile.TemporaryDirectory() as tmp:
        fwd, rev = Path(tmp) / "fwd", Path(tmp) / "rev"
        Aligner().align([s.lower() for s in sources], [t.lower() for t in targets],
                        links_filename_fwd=str(fwd), links_filename_rev=str(rev))
        both = [fwd.read_text().split("\n"), rev.read_text().split("\n")]
    out = []
    for i in keep:
        one, two = ({tuple(map(int, p.split("-"))) for p in side[i].split()} for side in both)
        out.append((one & two, one | two))
    return out


def diagonal(sources: int, targets: int) -> Links:
    """The baseline that knows only lengths: target unit j to the source unit at the same share
    of the sentence."""
    return {(min(round(j * sources / max(targets, 1)), sources - 1), j) for j in range(targets)}


def aer(found: Sequence[Links], sure: Sequence[Links], possible: Sequence[Links]) -> dict[str, float]:
    """Corpus AER of ``found`` against sure and possible links, with precision (found links
    that are possible) and recall (sure links found)."""
    a = sum(len(x) for x in found)
    s = sum(len(x) for x in sure)
    a_s = sum(len(x & y) for x, y in zip(found, sure, strict=True))
    a_p = sum(len(x & y) for x, y in zip(found, possible, strict=True))
    return {"aer": 1.0 - (a_s + a_p) / max(a + s, 1), "precision": a_p / max(a, 1),
            "recall": a_s / max(s, 1)}
