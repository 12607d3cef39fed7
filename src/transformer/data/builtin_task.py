"""The built-in translation task of ``transformer demo``: English number words to German ones.

    "twenty-one"                -> "einundzwanzig"
    "three hundred forty-five"  -> "dreihundertfünfundvierzig"
    "two hundred one thousand"  -> "zweihunderteintausend"

It is generated in code (deterministic, no files) and is a real translation problem in miniature:
German says the units before the tens ("fünfundvierzig" is five-and-forty), so the model must
reorder inside every group of three digits; it writes one word where English writes several; and
it has the spelling rules a lookup table would miss: "eins" alone or at the end ("einhunderteins")
but "ein-" in front of "und", "hundert" and "tausend"; "sechzehn" and "siebzehn", "sechzig" and
"siebzig" (not "sechs-", "sieben-"); "dreißig" with ß.

English follows the American style without "and" ("one hundred five"), with "one hundred" and
"one thousand" spelled out; German writes "einhundert" and "eintausend" (also spelled out).

Splits share no number. Numbers 1..99 are always in ``train``: they are the vocabulary of the task
(nothing can infer "elf" or "dreißig"); valid and test probe composition with numbers of 3 or more
digits. The rest are drawn so that every digit count (3, 4, ... digits) is about equally common,
otherwise almost every number below a million would have six digits.
"""

from __future__ import annotations

import random

from transformer.data.parallel import ParallelCorpus

EN_ONES = (
    "", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)  # fmt: skip
EN_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")

DE_ONES = ("", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun")
DE_TEENS = (
    "zehn", "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn",
    "achtzehn", "neunzehn",
)  # fmt: skip
DE_TENS = ("", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig")  # fmt: skip

MAX_NUMBER = 999_999
LEXICON = range(1, 100)  # always in train


def _check(n: int) -> None:
    if not isinstance(n, int) or not 1 <= n <= MAX_NUMBER:
        raise ValueError(f"number must be an integer in [1, {MAX_NUMBER}], got {n!r}")


def _english_below_1000(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    words = [f"{EN_ONES[hundreds]} hundred"] if hundreds else []
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(EN_TENS[tens] + (f"-{EN_ONES[ones]}" if ones else ""))
    elif rest:
        words.append(EN_ONES[rest])
    return " ".join(words)


def english_number(n: int) -> str:
    """English words for ``n`` in 1..999,999: "three hundred forty-five thousand six"."""
    _check(n)
    thousands, rest = divmod(n, 1000)
    words = [f"{_english_below_1000(thousands)} thousand"] if thousands else []
    if rest:
        words.append(_english_below_1000(rest))
    return " ".join(words)


def _german_below_100(n: int, *, final: bool) -> str:
    """German for 1..99; a final 1 is "eins", a 1 before "tausend" is "ein"."""
    if n == 1:
        return "eins" if final else "ein"
    if n < 10:
        return DE_ONES[n]
    if n < 20:
        return DE_TEENS[n - 10]
    tens, ones = divmod(n, 10)
    if not ones:
        return DE_TENS[tens]
    # units first: 45 = fünfundvierzig ("five-and-forty"); 21 = einundzwanzig, never "eins-"
    return ("ein" if ones == 1 else DE_ONES[ones]) + "und" + DE_TENS[tens]


def _german_below_1000(n: int, *, final: bool) -> str:
    hundreds, rest = divmod(n, 100)
    word = ("ein" if hundreds == 1 else DE_ONES[hundreds]) + "hundert" if hundreds else ""
    if rest:
        word += _german_below_100(rest, final=final)
    return word


def german_number(n: int) -> str:
    """German words for ``n`` in 1..999,999, written as one word: "dreihundertfünfundvierzig"."""
    _check(n)
    thousands, rest = divmod(n, 1000)
    word = _german_below_1000(thousands, final=False) + "tausend" if thousands else ""
    if rest:
        word += _german_below_1000(rest, final=True)
    return word


def number_task_numbers(
    seed: int = 0,
    *,
    train_size: int = 4000,
    valid_size: int = 500,
    test_size: int = 500,
    max_number: int = MAX_NUMBER,
) -> dict[str, list[int]]:
    """The numbers behind :func:`number_task_splits` (same arguments, same order)."""
    if not isinstance(max_number, int) or not 1000 <= max_number <= MAX_NUMBER:
        raise ValueError(
            f"max_number must be an integer in [1000, {MAX_NUMBER}], got {max_number!r}"
        )
    if train_size < len(LEXICON) + 1:
        raise ValueError(f"train_size must be at least {len(LEXICON) + 1}, got {train_size}")
    if valid_size < 1 or test_size < 1:
        raise ValueError(
            f"valid_size and test_size must be positive, got {valid_size}, {test_size}"
        )
    need = valid_size + test_size + train_size - len(LEXICON)
    available = max_number - len(LEXICON)
    if need > available:
        raise ValueError(
            f"train_size + valid_size + test_size = {train_size + valid_size + test_size} is more "
            f"than the {max_number} numbers up to max_number={max_number}"
        )
    rng = random.Random(seed)
    # strata of numbers with 3, 4, ... digits, as [low, high] ranges
    strata = [
        (10 ** (d - 1), min(10**d - 1, max_number)) for d in range(3, len(str(max_number)) + 1)
    ]
    taken = [0] * len(strata)
    chosen: set[int] = set()
    drawn: list[int] = []
    while len(drawn) < need:
        open_strata = [i for i, (lo, hi) in enumerate(strata) if taken[i] < hi - lo + 1]
        i = rng.choice(open_strata)
        n = rng.randint(*strata[i])
        if n not in chosen:
            chosen.add(n)
            drawn.append(n)
            taken[i] += 1
    numbers = {
        "train": [*LEXICON, *drawn[valid_size + test_size :]],
        "valid": drawn[:valid_size],
        "test": drawn[valid_size : valid_size + test_size],
    }
    rng.shuffle(numbers["train"])
    return numbers


def number_task_splits(seed: int = 0, **sizes: int) -> dict[str, ParallelCorpus]:
    """The task's splits: ``{"train", "valid", "test"}`` -> English-German :class:`ParallelCorpus`,
    the numbers of :func:`number_task_numbers` with the same arguments (``train_size=4000``,
    ``valid_size=500``, ``test_size=500``, ``max_number``; defaults and checks are its own).

    The same arguments give the same pairs in the same order on every machine (Python's
    ``random.Random``, stable across versions). ``train`` holds 1..99 plus numbers drawn from
    100..``max_number`` (every digit count about equally likely); ``valid`` and ``test`` are drawn
    from the same numbers and no number is in two splits. ``max_number=9_999`` gives shorter
    sentences (German at most 42 characters instead of 65) for a faster demo.
    """
    numbers = number_task_numbers(seed, **sizes)
    return {
        split: ParallelCorpus(
            [english_number(n) for n in values],
            [german_number(n) for n in values],
            name=f"numbers/{split}.en-de",
        )
        for split, values in numbers.items()
    }
