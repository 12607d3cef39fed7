"""Lines that may hold several sentences, translated sentence by sentence: what ``translate``,
``evaluate`` and ``serve`` do with their input.

    translator = load_translator("runs/m30k")
    src, tgt = translator.record.languages
    translate_lines(translator, ["Two dogs run. A cat sleeps.", ""], src_lang=src, tgt_lang=tgt)
    # -> [LineTranslation("Zwei Hunde rennen. Eine Katze schläft.", sentences=2), LineTranslation("")]

Each line is split into sentences (:func:`~transformer.inference.sentences.split_sentences`, in the
source language; ``split=False`` keeps the line whole), a sentence longer than the model's
positions is cut at its best boundary (:func:`~transformer.inference.sentences.cut_to_fit`, in
source tokens) instead of being truncated, the pieces of all lines are translated as one batch
(the translator groups them by length) and joined back per line with a space ("" for Chinese and
Japanese targets). Line order and count are kept; an empty line gives an empty translation.

A line with a target prefix (the options' ``target_prefix``, or its own in ``prefixes``) is
translated whole: its prefix starts the whole line's translation, which may span the line's
sentences (a line too long for the model is still cut, and its first piece gets the prefix).
A line with constraints (target phrases its translation must contain, ``constraints``) is
likewise translated whole, so that each phrase can go wherever it fits in the line's translation
(a line too long for the model is cut, and its first piece gets them all).
When sampling, each piece's draws are keyed by its line number and its place in the line, so a
line gets the same samples however the input is chunked or batched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from transformer.config.decoding import DecodeOptions
from transformer.inference.sentences import cut_to_fit, joiner, split_sentences
from transformer.inference.translator import Translation, Translator

log = logging.getLogger(__name__)


@dataclass
class LineTranslation(Translation):
    """One input line's translation. ``sentences``: how many it was translated as (0 for an empty
    line); ``cut``: how many of them were longer than the model's positions and were cut to fit.
    With several sentences, ``score``, ``log_prob`` and ``tokens`` are the sums of theirs and the
    k-th n-best entry joins their k-th candidates (not a true k-best of the line).
    ``alignments``: the line's (source word, target word) pairs when the options ask for them
    (:mod:`transformer.inference.alignment`)."""

    sentences: int = 0
    cut: int = 0
    alignments: list[tuple[int, int]] | None = None

    def to_dict(self, *, text_key: str = "text", nbest: bool = False,
                alignments: bool = False) -> dict[str, Any]:
        """The translation as JSON gives it, the one rendering of ``translate --json`` (``text_key``
        "translation") and of the server's answers ("text"): the text under ``text_key``, ``score``,
        ``log_prob``, ``log_prob_per_token``, ``sentences``, ``cut_sentences``; with ``nbest``,
        ``nbest`` (each candidate's text under ``text_key``, its score and log-probabilities; a
        per-token figure is None for a candidate of no tokens); with ``alignments``, its
        (source word, target word) pairs as lists."""
        row: dict[str, Any] = {text_key: self.text, "score": self.score, "log_prob": self.log_prob,
                               "log_prob_per_token": self.log_prob_per_token,
                               "sentences": self.sentences, "cut_sentences": self.cut}
        if nbest:
            row["nbest"] = [{text_key: text, "score": score, "log_prob": lp,
                             "log_prob_per_token": lp / n if n else None}
                            for (text, score), (lp, n) in zip(self.nbest, self.nbest_log_probs, strict=True)]
        if alignments:
            row["alignments"] = [list(pair) for pair in self.alignments or []]
        return row


def nth_sentence(text: str, number: int, *, lang: str = "en") -> tuple[str, list[str]]:
    """The ``number``-th sentence (from 1) of ``text`` and all its sentences: what the attention
    views show, one sentence at a time (a model that saw single sentences attends across a
    paragraph in ways that mean little). Raises ValueError for a number out of range."""
    sentences = split_sentences(text, lang=lang) or [text.strip()]
    if not 1 <= number <= len(sentences):
        raise ValueError(f"{number} is out of range: the text has {len(sentences)} "
                         f"sentence{'s' if len(sentences) > 1 else ''}")
    return sentences[number - 1], sentences


@dataclass
class LinePlan:
    """What :func:`translate_lines` decodes for some lines: their pieces (``units``: sentences,
    or parts of a sentence too long for the model), each piece's target prefix, target phrases
    and sampling key, and per line ``(first unit, end unit, sentences, cut)``. Decoding the units
    in any groups (:meth:`translate`) and handing all their translations to :meth:`assemble`
    gives what one call decodes (:mod:`transformer.inference.streaming` streams it so)."""

    lines: list[str]
    units: list[str]
    prefixes: list[str]
    phrases: list[list[str]]
    keys: list[tuple[object, int]]
    spans: list[tuple[int, int, int, int]]
    constrained: bool  # whether the call was given constraints at all

    def line_of(self) -> list[tuple[int, int]]:
        """Per unit: (its line's place in ``lines``, its place in that line), from 0."""
        return [(i, u - a) for i, (a, b, _, _) in enumerate(self.spans) for u in range(a, b)]

    def translate(self, translator: Translator, start: int = 0, end: int | None = None, *,
                  options: DecodeOptions | None = None, source_prefix: Sequence[int] = (),
                  log_probs: bool = True, progress: bool = False,
                  on_token: Callable[[int], None] | None = None) -> list[Translation]:
        """The translations of ``units[start:end]``, in order (``options`` None: the
        translator's; ``on_token``: :meth:`Translator.translate
        <transformer.inference.translator.Translator.translate>`'s, for one unit)."""
        part = slice(start, len(self.units) if end is None else end)
        return translator.translate(self.units[part], options=options, prefixes=self.prefixes[part],
                                    keys=self.keys[part],
                                    constraints=self.phrases[part] if self.constrained else None,
                                    source_prefix=source_prefix, log_probs=log_probs,
                                    progress=progress, on_token=on_token)

    def assemble(self, translator: Translator, found: Sequence[Translation], *,
                 tgt_lang: str | None = None,
                 options: DecodeOptions | None = None,
                 align_lines: Sequence[bool] | None = None) -> list[LineTranslation]:
        """One :class:`LineTranslation` per line from every unit's translation (``found``, in
        unit order): its pieces joined, and its word alignments when the options ask for them
        (``align_lines``: of the lines it flags, whatever the options say)."""
        if len(found) != len(self.units):
            raise ValueError(f"found: {len(found)} translations for {len(self.units)} units")
        opt = translator.options if options is None else options
        glue = joiner(tgt_lang)
        out = [_joined(found[a:b], glue, sentences=n, cut=cut) for a, b, n, cut in self.spans]
        if align_lines is not None or opt.alignments:
            _align(translator, self.lines, self.units, [t.text for t in found], self.spans, out,
                   only=align_lines)
        return out


def plan_lines(translator: Translator, lines: Sequence[str], *, split: bool = True,
               src_lang: str = "en", first_line: int = 1,
               prefixes: Sequence[str | None] | None = None, keys: Sequence[object] | None = None,
               constraints: Sequence[Sequence[str]] | None = None,
               options: DecodeOptions | None = None) -> LinePlan:
    """The :class:`LinePlan` of ``lines``: each split into sentences and each sentence cut to
    the model's positions, as :func:`translate_lines` (whose keywords these are) translates
    them. A line with a sentence cut to fit gets one warning naming it."""
    opt = translator.options if options is None else options
    limit = int(translator.config.max_len)
    tokenizer = translator.src_tokenizer
    for name, given in (("prefixes", prefixes), ("keys", keys), ("constraints", constraints)):
        if given is not None and len(given) != len(lines):
            raise ValueError(f"{name}: {len(given)} given for {len(lines)} lines")

    def count(text: str) -> int:
        return len(tokenizer.encode(text))

    units: list[str] = []
    unit_prefixes: list[str] = []  # each unit's own: a line's prefix goes to its first piece
    unit_phrases: list[list[str]] = []  # likewise a line's constraints
    unit_keys: list[tuple[object, int]] = []  # (line's key, piece): what a unit's draws follow
    spans: list[tuple[int, int, int, int]] = []  # (first unit, end unit, sentences, cut)
    for i, (number, line) in enumerate(enumerate(lines, start=first_line)):
        prefix = prefixes[i] if prefixes is not None and prefixes[i] is not None else None
        prefix = (opt.target_prefix if prefix is None else prefix) or ""
        phrases = list(constraints[i]) if constraints is not None else []
        if split and not prefix.strip() and not phrases:
            sentences = split_sentences(line, lang=src_lang)
        else:
            sentences = [line.strip()] if line.strip() else []
        start, cut = len(units), 0
        for sentence in sentences:
            pieces = cut_to_fit(sentence, count=count, limit=limit)
            cut += len(pieces) > 1
            units.extend(pieces)
        unit_prefixes.extend(prefix if u == start else "" for u in range(start, len(units)))
        unit_phrases.extend(phrases if u == start else [] for u in range(start, len(units)))
        line_key = number if keys is None else keys[i]
        unit_keys.extend((line_key, u - start) for u in range(start, len(units)))
        if cut:
            log.warning("line %d: %d sentence(s) longer than the model's %d source positions were "
                        "cut at clause or word boundaries and translated in pieces",
                        number, cut, limit)
        spans.append((start, len(units), len(sentences), cut))
    return LinePlan(list(lines), units, unit_prefixes, unit_phrases, unit_keys, spans,
                    constrained=constraints is not None)


def translate_lines(translator: Translator, lines: Sequence[str], *, split: bool = True,
                    src_lang: str = "en", tgt_lang: str | None = None, first_line: int = 1,
                    prefixes: Sequence[str | None] | None = None,
                    keys: Sequence[object] | None = None,
                    constraints: Sequence[Sequence[str]] | None = None,
                    options: DecodeOptions | None = None, source_prefix: Sequence[int] = (),
                    log_probs: bool = True, progress: bool = False,
                    align_lines: Sequence[bool] | None = None) -> list[LineTranslation]:
    """Translate ``lines`` (each possibly several sentences); one :class:`LineTranslation` per
    line, in order. A line with a sentence cut to fit gets one warning naming it (numbered from
    ``first_line``). ``prefixes``: one target prefix per line ("": none; None, or no list: the
    options' ``target_prefix``). ``keys``: what each line's random draws
    follow when sampling (default: its number). ``constraints``: target phrases per line ([]:
    none) that its translation must contain (a line with some is translated whole).
    ``options``, ``source_prefix``, ``log_probs``, ``progress``: this call's, as
    :meth:`Translator.translate <transformer.inference.translator.Translator.translate>` takes
    them (``options`` None: the translator's). ``align_lines``: one flag per line, the lines
    that get word alignments whatever the options say (None: every line when the options ask
    for them); the search is the same either way."""
    if align_lines is not None and len(align_lines) != len(lines):
        raise ValueError(f"align_lines: {len(align_lines)} given for {len(lines)} lines")
    plan = plan_lines(translator, lines, split=split, src_lang=src_lang, first_line=first_line,
                      prefixes=prefixes, keys=keys, constraints=constraints, options=options)
    found = plan.translate(translator, options=options, source_prefix=source_prefix,
                           log_probs=log_probs, progress=progress)
    return plan.assemble(translator, found, tgt_lang=tgt_lang, options=options,
                         align_lines=align_lines)


def _align(translator: Translator, lines: Sequence[str], units: list[str], texts: list[str],
           spans: list[tuple[int, int, int, int]], out: list[LineTranslation], *,
           only: Sequence[bool] | None = None) -> None:
    """Each line's word alignments (of the lines ``only`` flags; None: all), from its sentences
    aligned in one batch."""
    from transformer.inference.alignment import align_texts, line_pairs

    chosen = [i for i in range(len(lines)) if only is None or only[i]]
    picked = [u for i in chosen for u in range(spans[i][0], spans[i][1])]
    found = align_texts(translator.model, translator.src_tokenizer, translator.tgt_tokenizer,
                        [units[u] for u in picked], [texts[u] for u in picked])
    pairs = dict(zip(picked, found, strict=True))
    for i in chosen:
        a, b = spans[i][0], spans[i][1]
        out[i].alignments = line_pairs(lines[i], out[i].text, [
            (units[u], texts[u], pairs[u]) for u in range(a, b)])


def stream_lines(translator: Translator, lines: Iterable[str], *, chunk_size: int | None = None,
                 **how: Any) -> Iterator[LineTranslation]:
    """:func:`translate_lines` over an iterable, lazily: ``chunk_size`` lines (default the
    translator's batch size) are read, translated and yielded, in order, before the next
    (``how``: :func:`translate_lines`' keywords)."""
    size = chunk_size or translator.batch_size
    number, chunk = 1, []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= size:
            yield from translate_lines(translator, chunk, first_line=number, **how)
            number, chunk = number + len(chunk), []
    if chunk:
        yield from translate_lines(translator, chunk, first_line=number, **how)


def _joined(parts: Sequence[Translation], glue: str, *, sentences: int, cut: int) -> LineTranslation:
    """The translations of one line's pieces as the line's translation: its log-probability is
    the sum of theirs over the sum of their tokens (the pieces are translated independently)."""
    if len(parts) <= 1:
        one = parts[0] if parts else Translation("")
        return LineTranslation(one.text, one.score, list(one.nbest), one.log_prob, one.tokens,
                               list(one.nbest_log_probs), sentences=sentences, cut=cut)
    scores = [p.score for p in parts]
    score = None if any(s is None for s in scores) else sum(scores)  # type: ignore[arg-type]
    log_probs = [p.log_prob for p in parts]
    log_prob = None if any(lp is None for lp in log_probs) else sum(log_probs)  # type: ignore[arg-type]
    nbest: list[tuple[str, float]] = []
    nbest_log_probs: list[tuple[float, int]] = []
    for k in range(max(len(p.nbest) for p in parts)):
        with_nbest = [p for p in parts if p.nbest]
        picks = [p.nbest[min(k, len(p.nbest) - 1)] for p in with_nbest]
        nbest.append((glue.join(t for t, _ in picks if t), sum(s for _, s in picks)))
        counted = [p.nbest_log_probs[min(k, len(p.nbest_log_probs) - 1)] for p in with_nbest
                   if p.nbest_log_probs]
        nbest_log_probs.append((sum(lp for lp, _ in counted), sum(n for _, n in counted)))
    text = glue.join(p.text for p in parts if p.text)
    return LineTranslation(text, score, nbest, log_prob, sum(p.tokens for p in parts),
                           nbest_log_probs, sentences=sentences, cut=cut)
