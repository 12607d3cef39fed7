"""Inline tags carried from source words to target words through word alignments, as Bergamot
places them: the target words aligned to the words an element wrapped are wrapped by it.

    out = project(flow, elements, translation, pairs)   # pairs: (source word i, target word j)
    out.markup      # the flow's translation with its inline elements and units in place

The rule, per flow (a run of text between block tags, :mod:`transformer.inference.html_parse`):

1. A source word takes the inline elements of most of its characters (a tie: the deeper ones);
   a target word takes those of the source word it is aligned to (none when it has no pair).
2. An element is widened over the target words between its first and last (so that it stays
   one piece), except over a word that holds an element the source did not nest in it: there it
   is split, and written as several pieces (:attr:`Projection.split`).
3. An element that no target word holds (its words aligned to no target word, or all of its
   characters a minority in their words) wraps the target words aligned to its source words,
   else those of the nearest source word that has any (the earlier one on a tie). Where each of
   those already holds an element the source did not nest it in, it is written empty after them
   (:attr:`Projection.empty`).
4. A unit (inline ``code``, ``br``, ``img``, a comment, an element without words...) goes
   after the last target word aligned to the source word before it (at the start when none is
   before it; the nearest source word with a pair when that word has none), inside its own
   elements, with the space it had before and after it in the source.

Every element opened is closed: the output is written from each token's element path (root
first), closing what the next token does not hold and opening what it adds.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from transformer.inference.html_parse import Element, Flow, Token, Unit

Path = tuple[int, ...]


def escape_text(text: str) -> str:
    """Translated text as HTML: ``&``, ``<``, ``>`` and U+00A0 as entities."""
    return html.escape(text, quote=False).replace("\u00a0", "&nbsp;")


def _words(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def _prefix(a: Path, b: Path) -> bool:
    return b[: len(a)] == a


@dataclass
class Projection:
    """One flow's translation written with its markup. ``placements``: per element of the flow,
    (element, source words it wrapped, target words it wraps); ``split``: the elements written
    in more than one piece; ``empty``: those written with no word inside."""

    markup: str
    placements: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)
    split: int = 0
    empty: int = 0


@dataclass
class _Token:
    stack: Path
    word: str | None = None  # a target word, else a unit
    unit: Unit | None = None


def _path(elements: Sequence[Element], e: int) -> Path:
    out = []
    at: int | None = e
    while at is not None:
        out.append(at)
        at = elements[at].parent
    return tuple(reversed(out))


def _source_stacks(flow: Flow, words: list[tuple[int, int]]) -> list[Path]:
    out = []
    for a, b in words:
        counts: dict[Path, int] = {}
        for k in range(a, b):
            counts[flow.stacks[k]] = counts.get(flow.stacks[k], 0) + 1
        out.append(max(counts, key=lambda s: (counts[s], len(s))))
    return out


def _nearest(i: int, targets_of: dict[int, list[int]], count: int) -> list[int]:
    """The target words of source word ``i``, else of the nearest source word that has some
    (the earlier on a tie); [] when none has."""
    for d in range(count + 1):
        for k in (i - d, i + d):
            if 0 <= k < count and targets_of.get(k):
                return targets_of[k]
    return []


def project(flow: Flow, elements: Sequence[Element], translation: str,
            pairs: Sequence[tuple[int, int]], *, open_tag: Callable[[Token], str],
            unit_markup: Callable[[Unit], str], glue: str = " ") -> Projection:
    """``flow`` (which has words) translated as ``translation``, whose whitespace words are
    aligned to the flow's by ``pairs`` (source word i, target word j), written as HTML: the
    flow's leading and trailing whitespace, its inline elements around the target words of the
    rule above (``open_tag``: an element's start tag as written), its units where the rule puts
    them (``unit_markup``: a unit as written). ``glue``: what goes between two target words."""
    src_words = _words(flow.text)
    tgt = translation.split()
    src_stack = _source_stacks(flow, src_words)
    aligned: dict[int, int] = {}
    targets_of: dict[int, list[int]] = {}
    for i, j in sorted(pairs, key=lambda p: (p[1], p[0])):
        if 0 <= j < len(tgt) and 0 <= i < len(src_words) and j not in aligned:
            aligned[j] = i
            targets_of.setdefault(i, []).append(j)
    stacks: list[Path] = [src_stack[aligned[j]] if j in aligned else () for j in range(len(tgt))]
    in_flow = sorted({e for s in flow.stacks for e in s} | {e for u in flow.units for e in u.stack})
    carried = {e for u in flow.units for e in u.stack}
    zeros: list[tuple[int, int, _Token]] = []  # (after target word, order, token)

    def word_at(offset: int) -> int:
        """The source word that starts last before character ``offset`` (-1: none)."""
        k = -1
        for w, (a, _) in enumerate(src_words):
            if a < offset:
                k = w
        return k

    for e in in_flow:  # rule 2, outer elements first (indices are in document order)
        path = _path(elements, e)
        held = [j for j in range(len(tgt)) if e in stacks[j]]
        if held:
            for j in range(held[0], held[-1] + 1):
                if e not in stacks[j] and _prefix(stacks[j], path):
                    stacks[j] = path
            continue
        if e in carried:
            continue
        wrapped = sorted({w for w, (a, b) in enumerate(src_words)
                          if any(e in flow.stacks[k] for k in range(a, b))})
        if not wrapped:
            continue
        candidates = sorted({j for i in wrapped for j in targets_of.get(i, [])}) \
            or sorted(_nearest(wrapped[0], targets_of, len(src_words)))
        fits = [j for j in candidates if _prefix(stacks[j], path)]
        for j in fits:  # rule 3
            stacks[j] = path
        if not fits:
            zeros.append((candidates[-1] if candidates else len(tgt) - 1, -1, _Token(path)))
    for order, unit in enumerate(flow.units):  # rule 4
        k = word_at(unit.offset)
        after = -1 if k < 0 else max(_nearest(k, targets_of, len(src_words)) or [len(tgt) - 1])
        zeros.append((after, order, _Token(unit.stack, unit=unit)))
    tokens = [t for _, _, t in sorted((z for z in zeros if z[0] < 0), key=lambda z: z[1])]
    by_word: dict[int, list[tuple[int, _Token]]] = {}
    for after, order, t in zeros:
        if after >= 0:
            by_word.setdefault(after, []).append((order, t))
    for j, word in enumerate(tgt):
        tokens.append(_Token(stacks[j], word=word))
        tokens.extend(t for _, t in sorted(by_word.get(j, []), key=lambda p: p[0]))
    return _written(flow, elements, tokens, src_words, open_tag=open_tag, unit_markup=unit_markup,
                    glue=glue, in_flow=in_flow)


def _written(flow: Flow, elements: Sequence[Element], tokens: list[_Token],
             src_words: list[tuple[int, int]], *, open_tag: Callable[[Token], str],
             unit_markup: Callable[[Unit], str], glue: str, in_flow: list[int]) -> Projection:
    text = flow.text
    # the whitespace before the first unit or word, and after the last
    first = min([len(text) - len(text.lstrip())] + [u.offset for u in flow.units])
    last = max([len(text.rstrip())] + [u.offset for u in flow.units])
    lead, trail = text[:first], text[last:]
    out = [escape_text(lead)]
    pieces: dict[int, int] = {}
    target_words: dict[int, list[int]] = {}
    word_count = 0
    empty: set[int] = set()
    current: Path = ()
    previous: _Token | None = None
    for t in tokens:
        common = 0
        while common < min(len(current), len(t.stack)) and current[common] == t.stack[common]:
            common += 1
        out.extend(f"</{elements[e].name}>" for e in reversed(current[common:]))
        if previous is not None:
            if previous.word is not None and t.word is not None:
                out.append(glue)
            elif previous.unit is not None and t.word is not None:
                out.append(" " if previous.unit.space_after else "")
            elif previous.unit is not None and t.unit is not None:
                out.append(" " if previous.unit.space_after and t.unit.space_before else "")
            elif previous.word is not None and t.unit is not None:
                out.append(" " if t.unit.space_before else "")
            elif previous.word is not None or t.word is not None:
                out.append(glue)
        for e in t.stack[common:]:
            pieces[e] = pieces.get(e, 0) + 1
            out.append(open_tag(elements[e].token))
        if t.word is not None:
            out.append(escape_text(t.word))
            for e in t.stack:
                target_words.setdefault(e, []).append(word_count)
            word_count += 1
        elif t.unit is not None:
            out.append(unit_markup(t.unit))
        elif t.stack:
            empty.add(t.stack[-1])
        current, previous = t.stack, t
    out.extend(f"</{elements[e].name}>" for e in reversed(current))
    out.append(escape_text(trail))
    placements = []
    for e in in_flow:
        wrapped = tuple(w for w, (a, b) in enumerate(src_words)
                        if any(e in flow.stacks[k] for k in range(a, b)))
        placements.append((e, wrapped, tuple(target_words.get(e, []))))
    return Projection("".join(out), placements, split=sum(n > 1 for n in pieces.values()),
                      empty=len(empty))
