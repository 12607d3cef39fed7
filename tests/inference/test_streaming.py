"""Streamed translation: the sentence events, in order, joined per line, are the unstreamed
answer, the final event is it, and a stream closed early decodes nothing more; one sentence
decoded greedily or sampled once streams its tokens first, and closing it stops the decode."""

from __future__ import annotations

import threading

import pytest

from helpers import CharTokenizer
from transformer.config.decoding import DecodeOptions
from transformer.inference.lines import translate_lines
from transformer.inference.streaming import (
    SentenceDone,
    StreamDone,
    TokenDone,
    chunk_bounds,
    stream_translation,
)
from transformer.inference.translator import Translator


def assert_close(got, want):
    """The same translations: texts, token counts and sentences equal, scores and
    log-probabilities to float32's last bits (the sentences were decoded in other batches)."""
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert (a.text, a.tokens, a.sentences, a.cut, a.nbest_log_probs and len(a.nbest)) == (
            b.text, b.tokens, b.sentences, b.cut, b.nbest_log_probs and len(b.nbest))
        for x, y in ((a.score, b.score), (a.log_prob, b.log_prob)):
            assert (x is None) == (y is None) and (x is None or x == pytest.approx(y, rel=1e-5))


def make(copy_model, **options) -> Translator:
    tok = CharTokenizer()
    base = dict(beam_size=1, max_len_a=1.0, max_len_b=3)
    return Translator(copy_model, tok, tok, bos_id=2, eos_id=3,
                      options=DecodeOptions(**{**base, **options}), batch_size=3)


LINES = ["Abc lag. Kjihgf! Bbbb lk? Dec hg.", "", "Lkj.", "Gab fed! Cab?"]


@pytest.mark.parametrize("options", [dict(beam_size=1), dict(beam_size=3),
                                     dict(sampling=True, seed=5, sampling_topk=4)])
def test_the_events_joined_are_the_unstreamed_answer(copy_model, options):
    translator = make(copy_model, **options)
    want = translate_lines(translator, LINES)
    events = list(stream_translation(translator, LINES))
    assert isinstance(events[-1], StreamDone)
    assert_close(events[-1].translations, want)
    sentences = events[:-1]
    assert all(isinstance(e, SentenceDone) for e in sentences)
    assert [e.index for e in sentences] == list(range(len(sentences)))
    assert [(e.line, e.sentence) for e in sentences] == [(0, 0), (0, 1), (0, 2), (0, 3), (2, 0),
                                                         (3, 0), (3, 1)]
    assert [e.source for e in sentences][:2] == ["Abc lag.", "Kjihgf!"]
    for line, line_want in enumerate(want):
        own = [e.translation for e in sentences if e.line == line]
        assert " ".join(t.text for t in own if t.text) == line_want.text
        if line_want.log_prob is not None:
            assert sum(t.log_prob for t in own) == pytest.approx(line_want.log_prob)
        assert sum(t.tokens for t in own) == line_want.tokens


def test_a_stream_decodes_one_sentence_before_its_first_event_and_nothing_after_it_is_closed(
        copy_model, monkeypatch):
    translator = make(copy_model)
    decoded: list[list[str]] = []
    real = translator.translate

    def counted(sentences, **kw):
        decoded.append(list(sentences))
        return real(sentences, **kw)

    monkeypatch.setattr(translator, "translate", counted)
    stream = stream_translation(translator, LINES, chunk_size=2)
    assert decoded == []  # nothing before it is advanced
    first = next(stream)
    assert isinstance(first, SentenceDone) and decoded == [["Abc lag."]]
    assert next(stream).index == 1 and decoded[1] == ["Kjihgf!", "Bbbb lk?"]
    stream.close()
    assert len(decoded) == 2


def test_chunk_bounds_cover_every_sentence_once():
    assert chunk_bounds(0) == []
    assert chunk_bounds(1) == [(0, 1)]
    assert chunk_bounds(7, first=1, size=3) == [(0, 1), (1, 4), (4, 7)]
    assert chunk_bounds(5, first=2, size=10) == [(0, 2), (2, 5)]
    with pytest.raises(ValueError, match="first and size"):
        chunk_bounds(3, size=0)


@pytest.mark.parametrize("options", [dict(beam_size=1), dict(sampling=True, seed=5, sampling_topk=4),
                                     dict(beam_size=1, target_prefix="ab")])
def test_one_sentence_streams_its_tokens_then_itself(copy_model, options):
    translator = make(copy_model, **options)
    want = translate_lines(translator, ["Kjihgf lkjab"])
    events = list(stream_translation(translator, ["Kjihgf lkjab"]))
    tokens = [e for e in events if isinstance(e, TokenDone)]
    assert len(tokens) >= 3 and events[: len(tokens)] == tokens
    assert [type(e) for e in events[len(tokens):]] == [SentenceDone, StreamDone]
    assert [t.step for t in tokens] == list(range(1, len(tokens) + 1))
    assert all((t.index, t.line, t.sentence) == (0, 0, 0) for t in tokens)
    # one letter a token (the tokenizer's), each text the last one and its new letter
    assert all(b.text[:-1] == a.text for a, b in zip(tokens, tokens[1:], strict=False))
    assert tokens[-1].text == events[-2].translation.text == want[0].text
    if "target_prefix" in options:
        assert [t.text for t in tokens[:2]] == ["a", "ab"]
    assert_close(events[-1].translations, want)


@pytest.mark.parametrize(("options", "lines"), [(dict(beam_size=3), ["Kjihgf lkjab"]),
                                                (dict(beam_size=1), ["Abc. Kjihgf."]),
                                                (dict(sampling=True, seed=1, nbest=2), ["Abc"])])
def test_beam_search_and_several_sentences_stream_no_tokens(copy_model, options, lines):
    events = list(stream_translation(make(copy_model, **options), lines))
    assert not any(isinstance(e, TokenDone) for e in events)


def test_closing_a_stream_at_its_first_token_stops_the_decode(copy_model, monkeypatch):
    """The decode is held at its second token until the stream is closed; it then stops there
    (a decode that went on would tell at least the 15 tokens it must make)."""
    translator = make(copy_model, min_length=15)
    told, gate = [], threading.Event()
    real = translator.translate

    def held(sentences, *, on_token, **kw):
        def counted(token_id):
            told.append(token_id)
            if len(told) == 2:
                gate.wait(5)
            on_token(token_id)
        return real(sentences, on_token=counted, **kw)

    monkeypatch.setattr(translator, "translate", held)
    full = len(real(["abcdefghijkl abcdefghijkl"])[0].text)
    assert full >= 14
    stream = stream_translation(translator, ["abcdefghijkl abcdefghijkl"])
    assert isinstance(next(stream), TokenDone)
    threading.Timer(0.2, gate.set).start()
    stream.close()  # joins the decode: it raises at its next token, the second
    assert len(told) == 2


def test_a_token_hook_is_refused_where_tokens_do_not_stay(copy_model):
    translator = make(copy_model, beam_size=3)
    with pytest.raises(ValueError, match="on_token: one sentence"):
        translator.translate(["abc"], on_token=lambda _: None)
    with pytest.raises(ValueError, match="on_token: one sentence"):
        make(copy_model).translate(["abc", "def"], on_token=lambda _: None)
