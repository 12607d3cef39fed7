"""HTML -> the runs of text a translation model reads, each with the inline elements around its
characters, and the markup between them kept byte for byte.

    doc = parse_html('<p>Two <b>dogs</b> run.</p>')
    [p for p in doc.parts if isinstance(p, Flow)][0].text     # -> "Two dogs run."

The standard library's ``html.parser`` reads the document (``convert_charrefs=False``, so every
entity is an event of its own); each event's raw text is cut from the input by the position the
parser reports, so joining the tokens' ``raw`` gives the input back exactly
(:func:`tokenize`). On those tokens:

- **Blocks.** A start or end tag of any element that is not inline (``p``, ``div``, ``li``,
  ``td``, ``h1``, ``title``...) ends the run of text before it and passes unchanged; the text
  between two such tags is one :class:`Flow`, split into sentences later.
- **Inline elements** (``b``, ``i``, ``em``, ``strong``, ``a``, ``span``, ``sup``, ``sub``,
  ``u``... :data:`INLINE`) are matched with their end tags and recorded per character of the
  flow (:attr:`Flow.stacks`), to be carried to the target words the alignments give. An end tag
  closes the inline elements opened inside it; an end tag with nothing open to close is dropped
  (as browsers drop it); an element still open at the end of the document is closed there. An
  inline element that holds a block (``<a href><div>..</div></a>``) is kept as a block: its tags
  pass unchanged and each block inside it is its own flow.
- **Units** pass unchanged, whole, and take a place among the target words (:class:`Unit`):
  ``code``, ``script``, ``style``, ``textarea``, ``svg`` and other elements whose content is not
  prose (:data:`UNIT_ELEMENTS`), any inline element marked ``translate="no"`` or
  ``class="notranslate"``, void elements that sit in text (``br``, ``img``, ``wbr``, ``input``),
  comments, the doctype, processing instructions, and an inline element with no words of its own
  (``<i class="icon"></i>``).
- **Raw blocks** pass unchanged and end the flow: ``pre``, and any block element marked
  ``translate="no"``.

Entities are decoded in the text the model reads (``&amp;`` -> ``&``, ``&nbsp;`` -> U+00A0).
The attributes ``title`` and ``alt`` of any start tag outside a unit or raw block are collected
for translation (:attr:`HtmlDocument.attributes`); :func:`start_tag` writes a tag back with them.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from transformer.errors import InputError

INLINE = frozenset({
    "a", "abbr", "acronym", "b", "bdi", "bdo", "big", "cite", "data", "del", "dfn", "em", "font",
    "i", "ins", "label", "mark", "q", "s", "small", "span", "strike", "strong", "sub", "sup",
    "time", "tt", "u", "button", "output", "ruby", "rb", "rt", "rp",
})
# whole elements that are not prose: passed unchanged, placed among the target words
UNIT_ELEMENTS = frozenset({
    "code", "kbd", "samp", "script", "style", "noscript", "template", "textarea", "svg", "math",
    "iframe", "object", "canvas", "video", "audio", "select",
})
# void elements that sit in running text (the others, hr, meta, link..., are block boundaries)
INLINE_VOID = frozenset({"br", "img", "wbr", "input", "embed", "source", "track", "area", "param"})
VOID = INLINE_VOID | frozenset({"hr", "meta", "link", "base", "col", "keygen", "frame"})
RAW_BLOCKS = frozenset({"pre", "listing", "xmp", "plaintext"})
TRANSLATED_ATTRIBUTES = ("title", "alt")
# characters no HTML text holds (a character class, not markup: the parser reads the markup)
_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")


@dataclass
class Token:
    """One parser event: ``kind`` is ``start``, ``end``, ``void`` (a void or self-closed start
    tag), ``text`` (data or one entity; ``text`` holds it decoded) or ``other`` (a comment, the
    doctype, a processing instruction); ``raw`` is its exact source text. A start tag's ``name``
    is lower-case and ``attrs`` are its attributes as the parser read them (values decoded)."""

    kind: str
    raw: str
    name: str = ""
    attrs: list[tuple[str, str | None]] = field(default_factory=list)
    text: str = ""


class _Events(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.events: list[tuple[tuple[int, int], Token]] = []

    def _add(self, token: Token) -> None:
        self.events.append((self.getpos(), token))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._add(Token("void" if tag in VOID else "start", "", tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._add(Token("void", "", tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        self._add(Token("end", "", tag))

    def handle_data(self, data: str) -> None:
        self._add(Token("text", ""))

    def handle_entityref(self, name: str) -> None:
        self._add(Token("text", ""))

    def handle_charref(self, name: str) -> None:
        self._add(Token("text", ""))

    def handle_comment(self, data: str) -> None:
        self._add(Token("other", ""))

    def handle_decl(self, decl: str) -> None:
        self._add(Token("other", ""))

    def unknown_decl(self, data: str) -> None:
        self._add(Token("other", ""))

    def handle_pi(self, data: str) -> None:
        self._add(Token("other", ""))


def check_readable(document: str, *, field: str = "html") -> None:
    """InputError naming ``field`` for a document the parser cannot read: one holding NUL or
    other control characters that no HTML text may hold (a binary file, most likely)."""
    bad = _CONTROL.search(document)
    if bad is not None:
        raise InputError(f"{field}: not an HTML document (control character "
                         f"U+{ord(bad.group()):04X} at character {bad.start() + 1})")


def tokenize(document: str) -> list[Token]:
    """The parser's events of ``document`` as tokens whose ``raw`` texts join to ``document``."""
    parser = _Events()
    parser.feed(document)
    parser.close()
    starts = [0]
    for line in document.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    offsets = [starts[line - 1] + col for (line, col), _ in parser.events]
    tokens = []
    for k, (offset, (_, token)) in enumerate(zip(offsets, parser.events, strict=True)):
        end = offsets[k + 1] if k + 1 < len(offsets) else len(document)
        token.raw = document[offset:end]
        if token.kind == "text":
            token.text = html.unescape(token.raw) if token.raw.startswith("&") else token.raw
        tokens.append(token)
    if offsets and offsets[0] > 0:  # nothing the parser saw as an event (never observed)
        tokens.insert(0, Token("text", document[: offsets[0]], text=document[: offsets[0]]))
    return [t for t in tokens if t.raw]


def _attr(token: Token, name: str) -> str | None:
    for key, value in token.attrs:
        if key == name:
            return value
    return None


def not_translated(token: Token) -> bool:
    """Whether a start tag says its element is not to be translated: ``translate="no"`` or the
    class ``notranslate`` (Google's convention)."""
    if (_attr(token, "translate") or "").strip().lower() == "no":
        return True
    return "notranslate" in (_attr(token, "class") or "").split()


@dataclass
class Element:
    """An inline element of a flow: its start tag and the element it sits in (None: the flow)."""

    index: int
    token: Token
    parent: int | None

    @property
    def name(self) -> str:
        return self.token.name


@dataclass
class Unit:
    """Markup kept whole inside a flow, at character ``offset`` of its text, inside the inline
    elements ``stack`` (outermost first). ``tokens``: what it is (empty for an inline element
    without words, which its stack then writes as an empty element)."""

    offset: int
    stack: tuple[int, ...]
    tokens: list[Token]
    space_before: bool = False
    space_after: bool = False


@dataclass
class Flow:
    """A run of text between two block boundaries: ``text`` (decoded), the inline elements
    around each of its characters (``stacks``, outermost first), its units, and its tokens as
    they came (``tokens``: written back unchanged when the flow has no words)."""

    text: str = ""
    stacks: list[tuple[int, ...]] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    tokens: list[Token] = field(default_factory=list)

    @property
    def has_words(self) -> bool:
        return bool(self.text.strip())


@dataclass
class HtmlDocument:
    """A parsed document: ``parts`` in order, each a :class:`Flow` or a :class:`Token` written
    back as it came (a block tag, a raw block's tokens); ``elements``: every inline element of
    the flows, by index; ``attributes``: the start tags whose ``title`` or ``alt`` is translated."""

    parts: list[Flow | Token]
    elements: list[Element]
    attributes: list[Token]


def _extent(tokens: list[Token], k: int) -> int:
    """The index of the end tag that closes the start tag ``tokens[k]`` (counting elements of
    the same name inside it), or the last token when none does."""
    name, depth = tokens[k].name, 0
    for m in range(k, len(tokens)):
        t = tokens[m]
        if t.name == name and t.kind == "start":
            depth += 1
        elif t.name == name and t.kind == "end":
            depth -= 1
            if depth == 0:
                return m
    return len(tokens) - 1


def _groups(tokens: list[Token]) -> list[tuple[str, list[Token]]]:
    """Tokens grouped as ``("unit", tokens)``, ``("raw", tokens)`` (kept whole) or
    ``("token", [token])``."""
    out: list[tuple[str, list[Token]]] = []
    k = 0
    while k < len(tokens):
        t = tokens[k]
        quiet = t.kind in ("start", "void") and not_translated(t)
        if t.kind == "start" and (t.name in UNIT_ELEMENTS or t.name in RAW_BLOCKS or quiet):
            end = _extent(tokens, k)
            inline = t.name in UNIT_ELEMENTS or t.name in INLINE
            out.append(("unit" if inline else "raw", tokens[k : end + 1]))
            k = end + 1
            continue
        if t.kind == "other" or (t.kind == "void" and (t.name in INLINE_VOID or quiet)):
            out.append(("unit", [t]))
        elif t.kind == "void" and t.name not in INLINE:
            out.append(("raw", [t]))
        else:
            out.append(("token", [t]))
        k += 1
    return out


def _matched(groups: list[tuple[str, list[Token]]]) -> list[tuple[str, list[Token]]]:
    """Inline start and end tags paired: a stray end tag dropped, an end tag that closes
    elements opened inside it given their end tags first, an element open at the end closed
    there, and an inline element whose range holds a block boundary made a block."""
    out: list[tuple[str, list[Token]]] = []
    open_at: list[int] = []  # indices in out of the open inline start tags
    pairs: dict[int, int] = {}
    for kind, toks in groups:
        t = toks[0]
        if kind == "token" and t.kind == "start" and t.name in INLINE:
            open_at.append(len(out))
            out.append(("inline-start", toks))
        elif kind == "token" and t.kind == "end" and t.name in INLINE:
            names = [out[i][1][0].name for i in open_at]
            if t.name not in names:
                continue  # nothing to close: dropped
            while open_at:
                i = open_at.pop()
                pairs[i] = len(out)
                closing = out[i][1][0].name
                out.append(("inline-end", [t if closing == t.name else Token("end", f"</{closing}>", closing)]))
                if closing == t.name:
                    break
        elif kind == "token" and t.kind in ("start", "end", "void"):
            out.append(("block", toks))
        else:
            out.append((kind, toks))
    while open_at:
        i = open_at.pop()
        pairs[i] = len(out)
        out.append(("inline-end", [Token("end", f"</{out[i][1][0].name}>", out[i][1][0].name)]))
    boundary = [kind in ("block", "raw") for kind, _ in out]
    changed = True
    while changed:  # an element around a block is a block, and so is one around it
        changed = False
        for a, b in pairs.items():
            if not boundary[a] and any(boundary[a + 1 : b]):
                boundary[a] = boundary[b] = changed = True
    return [("block", toks) if boundary[i] and kind.startswith("inline") else (kind, toks)
            for i, (kind, toks) in enumerate(out)]


def parse_html(document: str, *, field: str = "html") -> HtmlDocument:
    """``document`` as flows of text and the markup between them (see the module's doc);
    InputError naming ``field`` for one that cannot be read (:func:`check_readable`)."""
    check_readable(document, field=field)
    parts: list[Flow | Token] = []
    elements: list[Element] = []
    attributes: list[Token] = []
    flow = Flow()
    stack: list[int] = []
    words_in: dict[int, int] = {}  # element -> non-space characters and units inside it so far
    opened_at: dict[int, int] = {}

    def flush() -> None:
        nonlocal flow
        if flow.tokens:
            parts.append(flow)
        flow = Flow()

    def note(token: Token) -> None:
        if token.kind in ("start", "void") and any(_attr(token, a) for a in TRANSLATED_ATTRIBUTES):
            attributes.append(token)

    for kind, toks in _matched(_groups(tokenize(document))):
        t = toks[0]
        if kind in ("block", "raw"):
            flush()
            parts.extend(toks)
            if kind == "block":
                note(t)
        elif kind == "unit":
            if len(toks) == 1:
                note(t)
            flow.units.append(Unit(len(flow.text), tuple(stack), toks))
            flow.tokens.extend(toks)
            for e in stack:
                words_in[e] += 1
        elif kind == "inline-start":
            note(t)
            elements.append(Element(len(elements), t, stack[-1] if stack else None))
            stack.append(len(elements) - 1)
            words_in[stack[-1]], opened_at[stack[-1]] = 0, len(flow.text)
            flow.tokens.append(t)
        elif kind == "inline-end":
            e = stack.pop()
            if not words_in[e]:  # no words of its own: written where it stood, as it was
                flow.units.append(Unit(opened_at[e], (*stack, e), []))
                for outer in stack:
                    words_in[outer] += 1
            flow.tokens.append(t)
        else:  # text
            flow.text += t.text
            flow.stacks.extend([tuple(stack)] * len(t.text))
            solid = len(t.text) - sum(ch.isspace() for ch in t.text)
            for e in stack:
                words_in[e] += solid
            flow.tokens.append(t)
    flush()
    for f in parts:
        if isinstance(f, Flow):
            for unit in f.units:
                unit.space_before = unit.offset == 0 or f.text[unit.offset - 1].isspace()
                unit.space_after = unit.offset >= len(f.text) or f.text[unit.offset].isspace()
            f.units.sort(key=lambda u: u.offset)  # (stable: source order at one offset)
    return HtmlDocument(parts, elements, attributes)


def document_text(document: str, *, field: str = "html") -> str:
    """The words a reader sees of ``document`` (its flows' text, one space apart; no markup,
    scripts or attributes): what language identification reads of HTML. InputError naming
    ``field`` as :func:`parse_html` raises it."""
    parts = parse_html(document, field=field).parts
    return " ".join(" ".join(p.text.split()) for p in parts if isinstance(p, Flow) and p.has_words)


def start_tag(token: Token, values: dict[str, str], *, lang: tuple[str, str] | None = None) -> str:
    """A start tag written back: as it came unless ``values`` replaces one of its attributes
    (by name: a translated ``title`` or ``alt``) or ``lang`` = (source, target) languages and its
    ``lang`` attribute names the source language; then rebuilt, every attribute in its order."""
    changed = dict(values)
    if lang is not None:
        own = _attr(token, "lang")
        if own is not None and own.split("-")[0].strip().lower() == lang[0].lower():
            changed["lang"] = lang[1]
    if not any(key in changed for key, _ in token.attrs):
        return token.raw
    parts = [token.name]
    for key, value in token.attrs:
        value = changed.get(key, value)
        parts.append(key if value is None else f'{key}="{html.escape(value, quote=True)}"')
    close = " /" if token.raw.rstrip().endswith("/>") else ""
    return f"<{' '.join(parts)}{close}>"
