"""A line of text -> the sentences a translation model was trained on, and back.

    split_sentences("Two dogs run. A cat sleeps.", lang="en")   # -> ["Two dogs run.", "A cat sleeps."]
    cut_to_fit("a b, c d", count=lambda s: len(s.split()), limit=2)   # -> ["a b,", "c d"]
    joiner("ja")                                                  # -> "" ("" or " " between sentences)

Models trained on one sentence a line (Multi30k) mistranslate a paragraph fed whole, so
``translate``, ``evaluate`` and ``serve`` split each line with sentencex (Wikimedia's rule-based
segmenter for ~300 languages, with abbreviation lists; no model, no download) and translate the
sentences one by one. A sentence still longer than the model's positions is cut at the best
boundary that fits (:func:`cut_to_fit`) rather than truncated.
"""

from __future__ import annotations

from collections.abc import Callable

# Target languages written without spaces between sentences: their sentences are joined with "".
# Kept to the common ones on purpose (Thai, for one, does put a space between sentences).
NO_SPACE_LANGUAGES = frozenset({"zh", "ja", "yue", "wuu", "lzh"})

# A cut prefers to end after one of these (clause boundaries), else at a space, else anywhere.
CLAUSE_ENDS = (",", ";", ":", "\u3001", "\uff0c", "\uff1b", "\uff1a")


def split_sentences(text: str, *, lang: str = "en") -> list[str]:
    """The sentences of ``text`` in order, each stripped; ``[]`` for an empty or blank line.

    ``lang`` is an ISO 639 code (sentencex falls back through related languages, then to English,
    for one it does not know). Text without a sentence boundary comes back as one sentence."""
    import sentencex

    return [s.strip() for s in sentencex.segment(lang or "en", text) if s.strip()]


def cut_to_fit(text: str, *, count: Callable[[str], int], limit: int) -> list[str]:
    """``text`` in consecutive pieces of at most ``limit`` units each (``count(piece)``: a piece's
    length, e.g. its source tokens), each stripped; ``[text]`` when it fits already.

    Each piece is the longest run of whole words that fits, shortened to end after its last
    clause mark (``,`` ``;`` ``:``) when one lies in its second half; a single word longer than
    ``limit`` is cut between characters. Joining the pieces with spaces gives ``text`` back up to
    whitespace. ``count`` must grow with the text (a longer prefix never counts less)."""
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    text = text.strip()
    pieces: list[str] = []
    while text and count(text) > limit:
        words = text.split()
        # the most words that fit (binary search: count grows with the prefix)
        lo, hi = 0, len(words)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(" ".join(words[:mid])) <= limit:
                lo = mid
            else:
                hi = mid - 1
        if lo == 0:  # the first word alone is too long: the most characters that fit
            word = words[0]
            lo_c, hi_c = 1, len(word)
            while lo_c < hi_c:
                mid = (lo_c + hi_c + 1) // 2
                if count(word[:mid]) <= limit:
                    lo_c = mid
                else:
                    hi_c = mid - 1
            pieces.append(word[:lo_c])
            text = (word[lo_c:] + " " + " ".join(words[1:])).strip()
            continue
        clause = [i for i in range(lo // 2 + 1, lo) if words[i - 1].endswith(CLAUSE_ENDS)]
        take = clause[-1] if clause else lo
        pieces.append(" ".join(words[:take]))
        text = " ".join(words[take:])
    if text:
        pieces.append(text)
    return pieces


def joiner(lang: str | None) -> str:
    """What goes between translated sentences in ``lang``: "" for Chinese and Japanese, else " "."""
    return "" if (lang or "").split("-")[0].lower() in NO_SPACE_LANGUAGES else " "
