"""The committed HTML corpus (benchmarks/data/html/corpus.jsonl: 240 snippets of Multi30k test
sentences) through translate_html_batch with a tiny model: every answer well-formed, no element,
attribute or untranslatable block lost (an element split in pieces counted), the text of each
answer the plain translation of its sentences, title and alt translated, lang rewritten."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from helpers import html_balance, html_start_tags, html_text, save_translator

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "html" / "corpus.jsonl"
BLOCKS = frozenset({"p", "li", "ul", "h2", "div", "figure", "figcaption", "title", "head", "body",
                    "html", "meta"})
KEPT = re.compile(r"<script>.*?</script>|<style>.*?</style>|<pre>.*?</pre>|<code>.*?</code>|"
                  r"<!--.*?-->|<!DOCTYPE[^>]*>|<span translate=\"no\">.*?</span>|"
                  r"<div translate=\"no\">.*?</div>", re.S)
TRANSLATED = {"title", "alt", "lang"}


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def translator(tmp_path_factory, corpus):
    from transformer.data.tokenizer import Tokenizer
    from transformer.inference import load_translator

    texts = [s for r in corpus for s in r["sentences"]]
    tokenizer = Tokenizer.train(texts, vocab_size=400, byte_fallback=True)
    path = save_translator(tmp_path_factory.mktemp("html") / "model", tokenizer, config={
        "training": {"src_lang": "en", "tgt_lang": "de", "decode_max_len_a": 1.0,
                     "decode_max_len_b": 2}})
    return load_translator(path, beam_size=1, precision="fp32")


@pytest.fixture(scope="module")
def answers(translator, corpus):
    from transformer.inference.html import translate_html_batch

    return translate_html_batch(translator, [r["html"] for r in corpus])


def _plain(translator, texts: list[str]) -> list[str]:
    from transformer.inference.lines import translate_lines

    return [t.text for t in translate_lines(translator, texts, src_lang="en", tgt_lang="de")]


def test_the_corpus_has_every_kind_of_snippet(corpus):
    assert len(corpus) >= 200
    html = "".join(r["html"] for r in corpus)
    for needed in ("<b>", "<strong>a", "<em>", '<a href="', "&nbsp;", "&amp;", "&#x31;", "&laquo;", "<script>", "<pre><code>",
                   'translate="no"', "<!DOCTYPE html>", "alt=", 'lang="en"', "<br>", "<!--"):
        assert needed in html, needed


def test_every_answer_is_well_formed(corpus, answers):
    assert all(html_balance(r["html"]) == [] for r in corpus)  # as the inputs are
    bad = {r["id"]: html_balance(a.html) for r, a in zip(corpus, answers, strict=True)}
    assert {k: v for k, v in bad.items() if v} == {}


def _tags(markup: str) -> Counter:
    return Counter((name, tuple((k, v) for k, v in attrs if k not in TRANSLATED))
                   for name, attrs in html_start_tags(markup))


def test_no_element_or_attribute_is_lost_and_a_split_is_counted(corpus, answers):
    pieces = 0
    for r, a in zip(corpus, answers, strict=True):
        source, target = _tags(r["html"]), _tags(a.html)
        assert source - target == Counter(), r["id"]  # every start tag, every attribute
        extra = target - source
        assert set(extra) <= set(source), r["id"]  # a piece of an element, never a new one
        assert (sum(extra.values()) > 0) == (a.split > 0), r["id"]
        pieces += a.split
    assert pieces == sum(a.split for a in answers)


def test_untranslatable_blocks_pass_unchanged(corpus, answers):
    for r, a in zip(corpus, answers, strict=True):
        for kept in KEPT.findall(r["html"]):
            assert kept in a.html, (r["id"], kept)


def test_the_text_is_the_plain_translation_of_the_sentences(translator, corpus, answers):
    plain = [(r, a) for r, a in zip(corpus, answers, strict=True) if r["plain"]]
    assert len(plain) >= 150
    expected = _plain(translator, [s for r, _ in plain for s in r["sentences"]])
    at = 0
    for r, a in plain:
        mine = expected[at: at + len(r["sentences"])]
        at += len(r["sentences"])
        assert html_text(a.html, blocks=BLOCKS) == " ".join(" ".join(mine).split()), r["id"]


def _key(name: str, attrs) -> tuple:
    return name, tuple((k, v) for k, v in attrs if k not in TRANSLATED)


def test_title_and_alt_are_translated_and_lang_becomes_the_target(translator, corpus, answers):
    checked = 0
    for r, a in zip(corpus, answers, strict=True):
        out = {}
        for name, attrs in html_start_tags(a.html):
            out.setdefault(_key(name, attrs), dict(attrs))
        for name, attrs in html_start_tags(r["html"]):
            for key, value in attrs:
                if key in ("title", "alt"):
                    assert out[_key(name, attrs)][key] == _plain(translator, [value])[0], r["id"]
                    checked += 1
                elif key == "lang":
                    assert out[_key(name, attrs)][key] == "de", r["id"]
                    checked += 1
    assert checked >= 60


def test_units_keep_their_place_among_the_words(corpus, answers):
    for r, a in zip(corpus, answers, strict=True):
        if r["kind"] == "lang":
            assert a.html.count("<br>") == 1
        if r["kind"] == "code":
            assert a.html.count("<code>npm install --save</code>") == 1
