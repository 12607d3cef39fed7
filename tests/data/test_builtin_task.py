"""The built-in number-words task: German and English spelling, deterministic disjoint splits."""

from __future__ import annotations

from collections import Counter

import pytest

from transformer.data.builtin_task import (
    english_number,
    german_number,
    number_task_numbers,
    number_task_splits,
)

# Reference spellings (Duden: Zahlwörter are written as one word below a million; "eins" stands
# alone and at the end, "ein" before "und", "hundert" and "tausend")
GERMAN = {
    1: "eins",
    2: "zwei",
    6: "sechs",
    7: "sieben",
    10: "zehn",
    11: "elf",
    12: "zwölf",
    13: "dreizehn",
    16: "sechzehn",
    17: "siebzehn",
    20: "zwanzig",
    21: "einundzwanzig",
    30: "dreißig",
    31: "einunddreißig",
    45: "fünfundvierzig",
    60: "sechzig",
    66: "sechsundsechzig",
    70: "siebzig",
    77: "siebenundsiebzig",
    99: "neunundneunzig",
    100: "einhundert",
    101: "einhunderteins",
    111: "einhundertelf",
    121: "einhunderteinundzwanzig",
    345: "dreihundertfünfundvierzig",
    1000: "eintausend",
    1001: "eintausendeins",
    1100: "eintausendeinhundert",
    2021: "zweitausendeinundzwanzig",
    16017: "sechzehntausendsiebzehn",
    21000: "einundzwanzigtausend",
    100000: "einhunderttausend",
    101000: "einhunderteintausend",
    201001: "zweihunderteintausendeins",
    999999: "neunhundertneunundneunzigtausendneunhundertneunundneunzig",
}
ENGLISH = {
    1: "one",
    13: "thirteen",
    21: "twenty-one",
    40: "forty",
    100: "one hundred",
    105: "one hundred five",
    345: "three hundred forty-five",
    1000: "one thousand",
    21000: "twenty-one thousand",
    101000: "one hundred one thousand",
    999999: "nine hundred ninety-nine thousand nine hundred ninety-nine",
}


@pytest.mark.parametrize(("n", "words"), GERMAN.items())
def test_german(n: int, words: str) -> None:
    assert german_number(n) == words


@pytest.mark.parametrize(("n", "words"), ENGLISH.items())
def test_english(n: int, words: str) -> None:
    assert english_number(n) == words


def test_german_is_compositional_everywhere() -> None:
    """Every number is <thousands>tausend<rest>, with "ein" (never "eins") before "tausend"."""
    for n in range(1, 1_000_000, 997):
        thousands, rest = divmod(n, 1000)
        word = german_number(n)
        assert word.islower() and word.isalpha()
        assert "einstausend" not in word and "einsund" not in word and "einshundert" not in word
        assert "sechsz" not in word and "siebenz" not in word
        if thousands:
            head = german_number(thousands)
            head = head[:-1] if head.endswith("eins") else head
            assert word == head + "tausend" + (german_number(rest) if rest else "")


def test_out_of_range() -> None:
    for bad in (0, 1_000_000, -5):
        with pytest.raises(ValueError, match="number must be"):
            german_number(bad)
        with pytest.raises(ValueError, match="number must be"):
            english_number(bad)


def test_splits_are_deterministic_disjoint_and_sized() -> None:
    splits = number_task_splits(seed=0)
    again = number_task_splits(seed=0)
    assert {k: v.pairs() for k, v in splits.items()} == {k: v.pairs() for k, v in again.items()}
    assert [len(splits[k]) for k in ("train", "valid", "test")] == [4000, 500, 500]
    sources = {k: set(v.src) for k, v in splits.items()}
    assert len(sources["train"]) == 4000  # no duplicates
    assert not sources["train"] & sources["valid"]
    assert not sources["train"] & sources["test"]
    assert not sources["valid"] & sources["test"]
    # the words a learner cannot infer are all in train
    assert {english_number(n) for n in range(1, 100)} <= sources["train"]
    for corpus in splits.values():
        assert all(len(s) <= 64 and len(t) <= 65 for s, t in corpus.pairs())


def test_seed_and_range_change_the_splits() -> None:
    assert number_task_splits(seed=1)["test"].src != number_task_splits(seed=0)["test"].src
    kwargs = dict(max_number=9_999, train_size=2000, valid_size=200, test_size=200)
    small = number_task_numbers(**kwargs)
    assert max(max(v) for v in small.values()) <= 9_999
    splits = number_task_splits(**kwargs)
    assert splits["valid"].src == [english_number(n) for n in small["valid"]]
    assert max(len(t) for t in splits["train"].tgt) <= 42


def test_digit_counts_are_balanced() -> None:
    numbers = number_task_numbers()
    assert min(numbers["valid"] + numbers["test"]) >= 100
    counts = Counter(len(str(n)) for n in numbers["test"])
    assert set(counts) == {3, 4, 5, 6}
    assert min(counts.values()) > 500 / 4 / 2


def test_bad_sizes() -> None:
    with pytest.raises(ValueError, match="train_size"):
        number_task_splits(train_size=50)
    with pytest.raises(ValueError, match="more than"):
        number_task_splits(max_number=1000, train_size=900, valid_size=100, test_size=100)
