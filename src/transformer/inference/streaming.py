"""Translations as they are made: one event per finished sentence, in order, then the whole
answer, so that a page or a subtitle tool shows a long paragraph's first sentences while the rest
is still being decoded.

    for event in stream_translation(translator, ["Two dogs run. A cat sleeps. ..."]):
        if isinstance(event, SentenceDone):
            show(event.line, event.sentence, event.translation.text)
        else:                                   # StreamDone: what translate_lines returns
            keep(event.translations)

The lines are split and cut as :func:`~transformer.inference.lines.translate_lines` splits them
(:func:`~transformer.inference.lines.plan_lines`); their sentences are decoded in chunks
(:func:`chunk_bounds`): the first sentence alone, so that it arrives early, then the rest in
batches of the translator's batch size, so that the whole answer costs about what one call costs
(the sentences of a chunk arrive together). Joining a line's sentence events gives the line's
translation, and the final event is what one :func:`translate_lines` call answers (a search that
depends on the batch it runs in may differ in the last bits between the two, as any two batch
sizes may).

A single sentence decoded greedily or sampled once also gets a :class:`TokenDone` per decoded
token before its :class:`SentenceDone`: the translation so far, as the tokens come. Beam search
gets none: it has no prefix that stays (a later step may drop every hypothesis that shares the
text shown so far). Nor do several sentences: they are decoded as one batch, whose tokens come
for all of them at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from transformer.config.decoding import DecodeOptions
from transformer.inference.lines import LinePlan, LineTranslation, _joined, plan_lines
from transformer.inference.translator import Translator, _one_line, token_streamable

T = TypeVar("T")

FIRST_CHUNK = 1  # sentences decoded before the first event: one, so that it comes soon


@dataclass
class SentenceDone:
    """One finished sentence: ``index`` its place among all the sentences streamed (from 0),
    ``line`` the input line it belongs to and ``sentence`` its place in that line (from 0);
    ``source`` the text decoded and ``translation`` its translation (a one-sentence
    :class:`~transformer.inference.lines.LineTranslation`: its text, score and log-probability)."""

    index: int
    line: int
    sentence: int
    source: str
    translation: LineTranslation


@dataclass
class TokenDone:
    """A token of a sentence being decoded: ``index``, ``line`` and ``sentence`` as the
    sentence's :class:`SentenceDone` will have them, ``step`` the tokens decoded so far (from 1,
    a target prefix's included) and ``text`` the translation so far, detokenized. Each event's
    ``text`` replaces the last one's (a piece may change how the text before it reads: a
    character split into byte pieces shows whole only when its last byte comes)."""

    index: int
    line: int
    sentence: int
    step: int
    text: str


class StreamClosed(Exception):
    """Raised inside a decode whose stream was closed, to stop it where it is."""


class TokenText:
    """The :class:`TokenDone` events of one sentence (``index``, ``line``, ``sentence``) from
    its target ids told one by one (EOS, which ends it, gets none)."""

    def __init__(self, translator: Translator, index: int = 0, line: int = 0, sentence: int = 0) -> None:
        self.translator, self.place = translator, (index, line, sentence)
        self.ids: list[int] = []

    def __call__(self, token_id: int) -> TokenDone | None:
        if token_id == self.translator.eos_id:
            return None
        self.ids.append(token_id)
        text = _one_line(self.translator.tgt_tokenizer.decode(self.ids))
        return TokenDone(*self.place, len(self.ids), text)


def token_teller(events: Callable[[int], TokenDone | None], deliver: Callable[[TokenDone], None],
                 closed: Callable[[], bool]) -> Callable[[int], None]:
    """An ``on_token`` for a decode in another thread: the event ``events`` makes of each id
    handed to ``deliver``; :class:`StreamClosed` raised once ``closed()`` says the reader has
    gone, which stops the decode at that token."""

    def on_token(token_id: int) -> None:
        if closed():
            raise StreamClosed("the stream was closed")
        found = events(token_id)
        if found is not None:
            deliver(found)

    return on_token


def tokens_as_made(run: Callable[[Callable[[int], None]], T],
                   events: Callable[[int], TokenDone | None]) -> Generator[TokenDone, None, T]:
    """``run(on_token)`` in a thread of its own, yielding the event ``events`` makes of each id
    told to ``on_token`` as it comes; returns what ``run`` returns (its exception raised here).
    Closing the generator stops the decode at its next token (:class:`StreamClosed`)."""
    told: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    closed = threading.Event()
    on_token = token_teller(events, lambda found: told.put(("token", found)), closed.is_set)

    def work() -> None:
        try:
            told.put(("done", run(on_token)))
        except BaseException as err:  # noqa: BLE001 - handed to the reader
            told.put(("error", err))

    thread = threading.Thread(target=work, name="stream-tokens", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = told.get()
            if kind == "token":
                yield value
            elif kind == "done":
                return value
            else:
                raise value
    finally:
        closed.set()
        thread.join()


def tokens_wanted(plan: LinePlan, options: DecodeOptions) -> bool:
    """Whether ``plan`` is streamed token by token: one unit, no constraints, and a search with
    a prefix that stays (:func:`~transformer.inference.translator.token_streamable`)."""
    return len(plan.units) == 1 and not any(plan.phrases) and token_streamable(options)


@dataclass
class StreamDone:
    """The end of a stream: one :class:`~transformer.inference.lines.LineTranslation` per input
    line, as :func:`~transformer.inference.lines.translate_lines` returns them."""

    translations: list[LineTranslation]


def chunk_bounds(count: int, *, first: int = FIRST_CHUNK, size: int = 64) -> list[tuple[int, int]]:
    """``count`` sentences in the chunks a stream decodes them in, as (start, end) pairs: the
    first ``first`` alone, then ``size`` at a time."""
    if first < 1 or size < 1:
        raise ValueError(f"first and size must be positive, got {first} and {size}")
    bounds, start = [], 0
    while start < count:
        end = min(count, start + (first if start == 0 else size))
        bounds.append((start, end))
        start = end
    return bounds


def sentence_events(plan: LinePlan, start: int, found: Sequence[Any]) -> list[SentenceDone]:
    """The events of ``plan``'s units ``start, start + 1, ...`` translated as ``found``."""
    where = plan.line_of()
    out = []
    for k, translation in enumerate(found, start=start):
        line, sentence = where[k]
        one = _joined([translation], "", sentences=1, cut=0)
        out.append(SentenceDone(k, line, sentence, plan.units[k], one))
    return out


def stream_translation(translator: Translator, lines: Sequence[str], *, split: bool = True,
                       src_lang: str = "en", tgt_lang: str | None = None,
                       prefixes: Sequence[str | None] | None = None,
                       keys: Sequence[object] | None = None,
                       constraints: Sequence[Sequence[str]] | None = None,
                       options: DecodeOptions | None = None, source_prefix: Sequence[int] = (),
                       log_probs: bool = True, first: int = FIRST_CHUNK,
                       chunk_size: int | None = None) -> Iterator[TokenDone | SentenceDone | StreamDone]:
    """Translate ``lines`` as :func:`~transformer.inference.lines.translate_lines` does (same
    keywords), yielding a :class:`SentenceDone` per sentence in order as its chunk is decoded,
    then one :class:`StreamDone`. ``first``: sentences in the first chunk; ``chunk_size``: in
    each later one (default the translator's batch size). Nothing is decoded before the
    generator is advanced, and closing it early leaves the sentences after the current chunk
    undecoded. One sentence decoded greedily or sampled once gets a :class:`TokenDone` per
    token first (decoded in a thread of its own, so that they come as it decodes)."""
    plan = plan_lines(translator, lines, split=split, src_lang=src_lang, prefixes=prefixes,
                      keys=keys, constraints=constraints, options=options)
    if tokens_wanted(plan, translator.options if options is None else options):
        line, sentence = plan.line_of()[0]
        found = yield from tokens_as_made(
            lambda on_token: plan.translate(translator, options=options, source_prefix=source_prefix,
                                            log_probs=log_probs, on_token=on_token),
            TokenText(translator, 0, line, sentence))
        yield from sentence_events(plan, 0, found)
        yield StreamDone(plan.assemble(translator, found, tgt_lang=tgt_lang, options=options))
        return
    found = []
    for start, end in chunk_bounds(len(plan.units), first=first,
                                   size=chunk_size or translator.batch_size):
        part = plan.translate(translator, start, end, options=options,
                              source_prefix=source_prefix, log_probs=log_probs)
        found.extend(part)
        yield from sentence_events(plan, start, part)
    yield StreamDone(plan.assemble(translator, found, tgt_lang=tgt_lang, options=options))
