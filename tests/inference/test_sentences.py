"""Sentence splitting and cutting, alone: sentencex's boundaries, cuts that fit and lose nothing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transformer.inference.sentences import cut_to_fit, joiner, split_sentences


def words(text: str) -> int:
    return len(text.split())


def test_split_sentences_keeps_order_and_abbreviations():
    assert split_sentences("Two dogs run. A cat sleeps!  Why? ") == ["Two dogs run.", "A cat sleeps!", "Why?"]
    # a real splitter: an abbreviation is not a sentence end
    assert split_sentences("Mr. Smith rides a horse. It rains.") == ["Mr. Smith rides a horse.", "It rains."]
    assert split_sentences("Ein Mann, z.B. hier. Zwei Hunde.", lang="de") == ["Ein Mann, z.B. hier.", "Zwei Hunde."]
    assert split_sentences("一个人。两只狗。", lang="zh") == ["一个人。", "两只狗。"]


@pytest.mark.parametrize("text", ["", "   ", "\t"])
def test_blank_lines_have_no_sentences(text):
    assert split_sentences(text) == []


def test_one_sentence_stays_whole():
    line = "A man in an orange hat starring at something"
    assert split_sentences(line) == [line] and split_sentences(line, lang="xx") == [line]


def test_cut_prefers_a_clause_boundary_then_a_space():
    assert cut_to_fit("a b c", count=words, limit=3) == ["a b c"]
    assert cut_to_fit("a b c, d e f g", count=words, limit=4) == ["a b c,", "d e f g"]
    # a comma in the first half of what fits would leave a tiny piece: cut at the last space instead
    assert cut_to_fit("a, b c d e f", count=words, limit=4) == ["a, b c d", "e f"]
    assert cut_to_fit("a b c d e f g", count=words, limit=3) == ["a b c", "d e f", "g"]


def test_cut_splits_a_word_longer_than_the_limit():
    assert cut_to_fit("abcdefgh ij", count=len, limit=3) == ["abc", "def", "gh", "ij"]
    with pytest.raises(ValueError, match="limit"):
        cut_to_fit("a", count=len, limit=0)


@given(st.lists(st.text(alphabet="ab,; ", min_size=1, max_size=9), min_size=1, max_size=12),
       st.integers(min_value=1, max_value=12))
def test_cut_pieces_fit_and_lose_nothing(chunks, limit):
    text = " ".join(chunks)
    pieces = cut_to_fit(text, count=len, limit=limit)
    assert all(0 < len(p) <= limit for p in pieces)
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")
    if len(text.strip()) <= limit:
        assert pieces == ([text.strip()] if text.strip() else [])


def test_joiner():
    assert joiner("de") == " " and joiner(None) == " " and joiner("ja") == "" and joiner("zh-Hans") == ""
