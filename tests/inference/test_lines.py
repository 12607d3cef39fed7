"""Lines of several sentences: translated sentence by sentence and joined, in order; too-long
sentences cut (counted, warned), never truncated; ``split=False`` feeds the whole line."""

from __future__ import annotations

import logging

import pytest

from helpers import CharTokenizer
from transformer.config.decoding import DecodeOptions
from transformer.inference.lines import stream_lines, translate_lines
from transformer.inference.sentences import cut_to_fit
from transformer.inference.translator import Translator


def make(copy_model, **options) -> Translator:
    tok = CharTokenizer()
    base = dict(beam_size=1, max_len_a=1.0, max_len_b=3)
    return Translator(copy_model, tok, tok, bos_id=2, eos_id=3,
                      options=DecodeOptions(**{**base, **options}), batch_size=4)


SENTENCES = ["Abc lag.", "Kjihgf!", "Bbbb lk?"]


def test_a_paragraph_translates_as_its_sentences(copy_model):
    t = make(copy_model)
    (line,) = translate_lines(t, [" ".join(SENTENCES)])
    alone = [x.text for x in t.translate(SENTENCES)]
    assert all(alone), "the copy model should produce real outputs"
    assert line.text == " ".join(alone) and line.sentences == 3 and line.cut == 0
    assert translate_lines(t, [" ".join(SENTENCES)], tgt_lang="ja")[0].text == "".join(alone)


def test_no_split_feeds_the_whole_line(copy_model):
    t = make(copy_model)
    whole = " ".join(SENTENCES)
    (line,) = translate_lines(t, [whole], split=False)
    assert line.text == t.translate([whole])[0].text and line.sentences == 1
    assert line.text != translate_lines(t, [whole])[0].text


def test_order_count_and_empty_lines(copy_model):
    t = make(copy_model)
    lines = [" ".join(SENTENCES), "", "Lk. Abc.", "   ", "cdefgh", "Kjihgf! Bbbb lk?", ""]
    got = translate_lines(t, lines)
    assert len(got) == len(lines)
    assert [g.text for g in got] == [translate_lines(t, [line])[0].text for line in lines]
    assert [g.text == "" for g in got] == [not line.strip() for line in lines]
    assert [g.sentences for g in got] == [3, 0, 2, 0, 1, 2, 0]
    for chunk in (1, 3, None):
        assert [g.text for g in stream_lines(t, iter(lines), chunk_size=chunk)] == [g.text for g in got]


def test_a_sentence_longer_than_the_model_is_cut_not_truncated(copy_model, caplog):
    t = make(copy_model)
    limit = copy_model.config.max_len  # 32 positions
    long = "abcdefgh ijkl abcdefgh, ijkl abcdefgh ijkl abcdefgh ijkl."  # 48 tokens, one sentence
    with caplog.at_level(logging.WARNING, logger="transformer.decoding.paragraphs"):
        got = translate_lines(t, ["Abc.", f"Kji. {long}", "", long])
    assert t.truncated == 0, "nothing may reach the model cut short"
    assert [g.cut for g in got] == [0, 1, 0, 1] and got[1].sentences == 2
    pieces = cut_to_fit(long, count=lambda s: len(t.src_tokenizer.encode(s)), limit=limit)
    assert pieces == ["abcdefgh ijkl abcdefgh,", "ijkl abcdefgh ijkl abcdefgh ijkl."]
    assert got[3].text == " ".join(x.text for x in t.translate(pieces))
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2 and "line 2:" in warnings[0] and "line 4:" in warnings[1]
    # --no-split still cuts a line that is too long rather than truncating it
    assert translate_lines(t, [long], split=False)[0].cut == 1 and t.truncated == 0


def test_scores_and_nbest_of_a_paragraph(copy_model):
    t = make(copy_model, beam_size=3, nbest=2)
    (line,) = translate_lines(t, [" ".join(SENTENCES)])
    alone = t.translate(SENTENCES)
    assert line.score == pytest.approx(sum(a.score for a in alone))
    assert line.nbest[0] == (line.text, pytest.approx(line.score)) and len(line.nbest) == 2
    assert line.nbest[1][0] == " ".join(a.nbest[1][0] for a in alone)

