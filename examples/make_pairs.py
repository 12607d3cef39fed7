"""Write the tiny English-German corpus in this folder: short sentences from a small grammar.

    python examples/make_pairs.py      # rewrites examples/{train,valid}.{en,de}

Subject, verb, object, each noun with an optional adjective; the German side gets its articles
and adjective endings right (nominative subject, accusative object). Seeded, so the files are the
same on every machine.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

# English noun -> (German noun, gender)
NOUNS = {"dog": ("Hund", "m"), "cat": ("Katze", "f"), "child": ("Kind", "n"),
         "man": ("Mann", "m"), "woman": ("Frau", "f"), "horse": ("Pferd", "n"),
         "bird": ("Vogel", "m"), "girl": ("Mädchen", "n")}
VERBS = {"sees": "sieht", "likes": "mag", "finds": "findet", "hears": "hört",
         "draws": "zeichnet", "watches": "beobachtet"}
ADJECTIVES = {"": "", "small": "klein", "big": "groß", "old": "alt", "young": "jung"}
ARTICLE = {("nom", "m"): "der", ("nom", "f"): "die", ("nom", "n"): "das",
           ("acc", "m"): "den", ("acc", "f"): "die", ("acc", "n"): "das"}


def german_phrase(noun: str, adjective: str, case: str) -> str:
    word, gender = NOUNS[noun]
    article = ARTICLE[(case, gender)]
    if not adjective:
        return f"{article} {word}"
    ending = "en" if (case, gender) == ("acc", "m") else "e"
    return f"{article} {ADJECTIVES[adjective]}{ending} {word}"


def english_phrase(noun: str, adjective: str) -> str:
    return f"the {adjective} {noun}" if adjective else f"the {noun}"


def pair(subject: tuple[str, str], verb: str, obj: tuple[str, str]) -> tuple[str, str]:
    en = f"{english_phrase(*subject)} {verb} {english_phrase(*obj)}."
    de = f"{german_phrase(*subject, 'nom')} {VERBS[verb]} {german_phrase(*obj, 'acc')}."
    return en[0].upper() + en[1:], de[0].upper() + de[1:]


def main() -> None:
    phrases = list(itertools.product(NOUNS, ADJECTIVES))
    every = [pair(s, v, o) for s in phrases for v in VERBS for o in phrases if s[0] != o[0]]
    random.Random(0).shuffle(every)
    here = Path(__file__).parent
    for split, rows in (("train", every[:2000]), ("valid", every[2000:2100])):
        for side, lang in enumerate(("en", "de")):
            text = "".join(row[side] + "\n" for row in rows)
            (here / f"{split}.{lang}").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
