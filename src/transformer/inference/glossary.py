"""Terminology: target phrases a translation must contain, given per line or by a glossary.

    glossary = read_glossary("terms.tsv")          # [("Hund", "dog"), ...] from 'SOURCE<TAB>TARGET'
    glossary_phrases("Der Hund schläft.", glossary)  # -> ["dog"]
    split_constrained("A dog.\\tHund", where="in.txt, line 3")  # -> ("A dog.", ["Hund"])

A glossary entry applies to a line where its source term occurs as whole words (not inside a
longer word), case-sensitively; its target term then becomes one of the line's constraints
(:mod:`transformer.decoding.constraints`). ``translate --constraints`` reads each input line as
``SOURCE<TAB>PHRASE<TAB>PHRASE...`` (fairseq's format). Bad input raises
:class:`~transformer.errors.InputError` naming the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from transformer.errors import InputError


def read_glossary(path: str, *, check: Callable[[str], object] | None = None) -> list[tuple[str, str]]:
    """The (source term, target term) pairs of a TSV file; blank lines are skipped. InputError
    naming ``path:line`` for a line without a tab, with more than one, with an empty term, or
    whose target term ``check`` refuses (with an InputError: a translator's ``phrase_ids``)."""
    from transformer.data.parallel import read_lines

    lines = read_lines(path)
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != 2:
            raise InputError(f"{path}:{number}: a glossary line is 'SOURCE TERM<TAB>TARGET TERM', "
                             f"got {len(fields) - 1} tabs")
        source, target = (f.strip() for f in fields)
        if not source or not target:
            side = "source" if not source else "target"
            raise InputError(f"{path}:{number}: the {side} term is empty")
        if check is not None:
            try:
                check(target)
            except InputError as err:
                raise InputError(f"{path}:{number}: {err}") from None
        out.append((source, target))
    return out


def glossary_phrases(text: str, glossary: Sequence[tuple[str, str]]) -> list[str]:
    """The target terms of the entries whose source term occurs in ``text`` as whole words
    (case-sensitive), in glossary order, each once."""
    out: list[str] = []
    for source, target in glossary:
        if target not in out and re.search(rf"(?<!\w){re.escape(source)}(?!\w)", text):
            out.append(target)
    return out


def merged_phrases(texts: Sequence[str], own: Sequence[Sequence[str]],
                   glossary: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Each text's target phrases, as ``translate`` and the server both give them: its own
    (stripped), then the target terms of the ``glossary`` entries it holds that are not among them."""
    out = []
    for text, phrases in zip(texts, own, strict=True):
        mine = [p.strip() for p in phrases]
        out.append(mine + [term for term in glossary_phrases(text, glossary) if term not in mine])
    return out


def check_phrases(phrases: Sequence[Sequence[str]], check: Callable[[str], object],
                  where: Callable[[int], str]) -> None:
    """Every distinct phrase of ``phrases`` (one list per text) checked once by ``check`` (a
    translator's ``phrase_ids``): InputError led by ``where(i)``, ``i`` the first text holding a
    phrase it refuses."""
    checked: set[str] = set()
    for i, own in enumerate(phrases):
        for phrase in own:
            if phrase in checked:
                continue
            try:
                check(phrase)
            except InputError as err:
                raise InputError(f"{where(i)}: {err}") from None
            checked.add(phrase)


def split_constrained(line: str, *, where: str) -> tuple[str, list[str]]:
    """``SOURCE<TAB>PHRASE<TAB>...`` -> (source, phrases); a line without a tab has none.
    InputError naming ``where`` for an empty phrase."""
    source, *phrases = line.split("\t")
    for k, phrase in enumerate(phrases, start=1):
        if not phrase.strip():
            raise InputError(f"{where}: constraint {k} is empty (input lines are "
                             "'SOURCE<TAB>PHRASE<TAB>PHRASE...')")
    return source, [p.strip() for p in phrases]
