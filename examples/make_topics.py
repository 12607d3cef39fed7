"""Write the tiny multi-label classification files in this folder: examples/topics-{train,valid}.tsv.

    python examples/make_topics.py

Each text is an English sentence of examples/make_pairs.py's grammar; its labels are the kinds of
thing it mentions (person, pet, farm animal, wild animal), one or two of them, comma-separated.
Seeded, so the files are the same on every machine.
"""

from __future__ import annotations

import random
from pathlib import Path

from make_pairs import ADJECTIVES, NOUNS, VERBS, english_phrase

KIND = {"dog": "pet", "cat": "pet", "child": "person", "man": "person", "woman": "person",
        "girl": "person", "horse": "farm", "bird": "wild"}


def main() -> None:
    rng = random.Random(1)
    rows = []
    for _ in range(900):
        subject, obj = rng.sample(list(NOUNS), 2)
        text = (f"{english_phrase(subject, rng.choice(list(ADJECTIVES)))} {rng.choice(list(VERBS))} "
                f"{english_phrase(obj, rng.choice(list(ADJECTIVES)))}.")
        labels = sorted({KIND[subject], KIND[obj]})
        rows.append(f"{text[0].upper() + text[1:]}\t{','.join(labels)}\n")
    here = Path(__file__).parent
    for name, part in (("topics-train.tsv", rows[:800]), ("topics-valid.tsv", rows[800:])):
        (here / name).write_text("text\tlabel\n" + "".join(part), encoding="utf-8")


if __name__ == "__main__":
    main()
