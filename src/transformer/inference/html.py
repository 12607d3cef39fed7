"""HTML in, HTML out: the text of a page translated, its markup kept where the words went.

    translator = load_translator("runs/m30k")
    translate_html(translator, '<p>A <b>black</b> dog runs.</p>').html
    # -> '<p>Ein <b>schwarzer</b> Hund rennt.</p>'
    translate_html_batch(translator, [page_1, page_2])   # one batch for all their sentences

The document is read by :mod:`transformer.inference.html_parse` (the standard library's parser;
blocks, inline elements, units that pass unchanged); the text between two block tags is one line
for :func:`~transformer.inference.lines.translate_lines` (split into sentences, translated with
the ordinary batching, joined back), and the inline elements and units of a line that has any
are carried to its translation through word alignments of the model's cross-attention
(:mod:`transformer.inference.alignment`; the placement rule: :mod:`transformer.inference.html_tags`).
A line with no inline markup is translated without the alignment pass. The ``title`` and
``alt`` attributes are translated as lines of their own, and a ``lang`` attribute that names the
source language is given the target's. Everything else (block tags, attributes, comments, the
doctype, ``script``, ``style``, ``pre``, ``code``, ``translate="no"`` elements, the whitespace
around each run of text and entities outside it) is written back byte for byte; in translated
text, ``&``, ``<``, ``>`` and the non-breaking space are written as entities.

Alignments come from a teacher-forced pass of our model, so an engine that decodes without it
(CTranslate2) reads our weights as well, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from transformer.config.decoding import DecodeOptions
from transformer.inference.html_parse import (
    TRANSLATED_ATTRIBUTES,
    Flow,
    HtmlDocument,
    Token,
    Unit,
    parse_html,
    start_tag,
)
from transformer.inference.html_tags import escape_text, project
from transformer.inference.lines import translate_lines
from transformer.inference.translator import Translator

__all__ = ["HtmlTranslation", "Placement", "translate_html", "translate_html_batch"]


@dataclass(frozen=True)
class Placement:
    """Where one inline element went: its ``name``, the run of text it was in (``source``) and
    that run's ``translation``, the whitespace words of ``source`` it wrapped and those of
    ``translation`` it wraps (0-based)."""

    name: str
    source: str
    translation: str
    source_words: tuple[int, ...]
    target_words: tuple[int, ...]


@dataclass
class HtmlTranslation:
    """One document's translation: ``html``; ``sentences`` translated (attributes included);
    ``elements``: the inline elements carried through alignments; ``split``: those written in
    more than one piece; ``empty``: those written with no word inside; ``placements``: where
    each carried element went; ``aligned``: (text, translation, word pairs) of each run of text
    whose markup went through alignments, in document order."""

    html: str
    sentences: int = 0
    elements: int = 0
    split: int = 0
    empty: int = 0
    placements: list[Placement] = field(default_factory=list)
    aligned: list[tuple[str, str, list[tuple[int, int]]]] = field(default_factory=list)


def _needs_alignment(flow: Flow) -> bool:
    return bool(flow.units) or any(flow.stacks)


def _line(flow: Flow) -> str:
    """What the model reads of a flow: its words, one space apart (a line break inside a
    paragraph is not a sentence boundary; the words, and so the alignments' indices, are the
    same as the flow's)."""
    return " ".join(flow.text.split())


def translate_html(translator: Translator, document: str, **how: object) -> HtmlTranslation:
    """One HTML document (or snippet) translated: :func:`translate_html_batch` of one."""
    return translate_html_batch(translator, [document], **how)[0]  # type: ignore[arg-type]


def translate_html_batch(translator: Translator, documents: Sequence[str], *,
                         options: DecodeOptions | None = None, split: bool = True,
                         src_lang: str | None = None, tgt_lang: str | None = None,
                         source_prefix: Sequence[int] = (), fields: Sequence[str] | None = None,
                         progress: bool = False) -> list[HtmlTranslation]:
    """Translate HTML ``documents``, all their sentences in one batch; one
    :class:`HtmlTranslation` each, in order.

    ``options``: how to decode (None: the translator's); an n-best list is refused (ValueError:
    one translation per document), and word alignments are the placement's own, not returned. ``src_lang``/``tgt_lang``: the languages (None: the model's
    record's), for splitting sentences, joining them and rewriting ``lang`` attributes.
    ``source_prefix``, ``split``, ``progress``: as :func:`~transformer.inference.lines.translate_lines`
    takes them. ``fields``: what names each document in an error (default ``html``, or
    ``html[k]``); InputError naming it for a document the parser cannot read."""
    opt = translator.options if options is None else options
    if opt.nbest:
        raise ValueError("nbest: an HTML document gets one translation")
    record_src, record_tgt = translator.record.languages if translator.record is not None else (None, None)
    src_lang = src_lang or record_src or "en"
    tgt_lang = tgt_lang or record_tgt
    names = list(fields) if fields is not None else (
        ["html"] if len(documents) == 1 else [f"html[{k}]" for k in range(len(documents))])
    parsed = [parse_html(d, field=name) for d, name in zip(documents, names, strict=True)]

    flows: list[Flow] = []  # every run of text with words, in order
    attribute_texts: list[str] = []
    for doc in parsed:
        flows.extend(p for p in doc.parts if isinstance(p, Flow) and p.has_words)
        for token in doc.attributes:
            attribute_texts.extend(v for k, v in token.attrs
                                   if k in TRANSLATED_ATTRIBUTES and v and v.strip())
    lines = [_line(f) for f in flows] + attribute_texts
    # one batch for all; alignments (a teacher-forced pass) only where there is markup to place
    found = translate_lines(translator, lines, options=replace(opt, alignments=False),
                            split=split, src_lang=src_lang, tgt_lang=tgt_lang,
                            source_prefix=source_prefix, log_probs=False, progress=progress,
                            align_lines=[_needs_alignment(f) for f in flows]
                            + [False] * len(attribute_texts)) if lines else []
    by_flow = {id(f): t for f, t in zip(flows, found, strict=False)}
    texts = iter(found[len(flows):])
    out = []
    for doc in parsed:
        attrs: dict[int, dict[str, Any]] = {}
        for token in doc.attributes:
            for k, v in token.attrs:
                if k in TRANSLATED_ATTRIBUTES and v and v.strip():
                    attrs.setdefault(id(token), {})[k] = next(texts)
        out.append(_render(doc, by_flow, attrs, lang=(src_lang, tgt_lang)))
    return out


def _render(doc: HtmlDocument, translations: dict, attrs: dict, *,
            lang: tuple[str, str | None]) -> HtmlTranslation:
    langs = (lang[0], lang[1]) if lang[1] else None

    def tag(token: Token) -> str:
        if token.kind not in ("start", "void"):
            return token.raw
        values = {k: t.text for k, t in attrs.get(id(token), {}).items()}
        return start_tag(token, values, lang=langs)  # type: ignore[arg-type]

    def unit(u: Unit) -> str:
        return tag(u.tokens[0]) if len(u.tokens) == 1 else "".join(t.raw for t in u.tokens)

    result = HtmlTranslation("")
    pieces: list[str] = []
    for part in doc.parts:
        if isinstance(part, Token):
            pieces.append(tag(part))
            continue
        if not part.has_words:
            pieces.append("".join(tag(t) for t in part.tokens))
            continue
        found = translations[id(part)]
        result.sentences += found.sentences
        if not _needs_alignment(part):
            lead = part.text[: len(part.text) - len(part.text.lstrip())]
            trail = part.text[len(part.text.rstrip()):]
            pieces.append(escape_text(lead) + escape_text(found.text) + escape_text(trail))
            continue
        shown = project(part, doc.elements, found.text, found.alignments or [], open_tag=tag,
                        unit_markup=unit)
        pieces.append(shown.markup)
        result.aligned.append((_line(part), found.text, list(found.alignments or [])))
        result.elements += len(shown.placements)
        result.split += shown.split
        result.empty += shown.empty
        result.placements.extend(Placement(doc.elements[e].name, part.text, found.text, s, t)
                                 for e, s, t in shown.placements)
    result.sentences += sum(t.sentences for v in attrs.values() for t in v.values())
    result.html = "".join(pieces)
    return result
