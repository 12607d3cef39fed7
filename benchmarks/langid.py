"""Language identification for the server's ``source: "auto"`` and ``POST /detect``: two packages
whose models ship in their wheels, restricted to the languages served, and the server's own
detector over the first (``transformer.inference.langid``), on test_2016_flickr's four
sides (English, German, French, Czech; 1,000 sentences each).

For each package: the share of sentences identified right per language, the time to build the
detector, and the cost per sentence (one sentence a call, as a request detects it; the median of
``--repeats`` passes over all 4,000). ``py3langid`` is the naive Bayes model of langid.py;
``lingua`` (lingua-language-detector) has n-gram models of 1-5 characters, in its high- and
low-accuracy modes.

    taskset -c 1 .venv/bin/python benchmarks/langid.py

Prints a table and writes benchmarks/results/langid.json with the machine.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from machine import describe  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("en", "de", "fr", "cs")


def read_sides(data: Path) -> dict[str, list[str]]:
    """test_2016_flickr's sentences per language."""
    out = {}
    for lang in LANGS:
        path = data / "multi30k" / f"test_2016_flickr.{lang}.gz"
        if not path.is_file():
            sys.exit(f"langid.py: {path} is missing (set TRANSFORMER_DATA or --data)")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            out[lang] = [line.strip() for line in f if line.strip()]
    return out


def py3langid_detector() -> Callable[[str], str]:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGS))
    return lambda text: identifier.classify(text)[0]


def lingua_detector(*, low_accuracy: bool) -> Callable[[str], str]:
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages = [Language.from_iso_code_639_1(getattr(IsoCode639_1, lang.upper())) for lang in LANGS]
    builder = LanguageDetectorBuilder.from_languages(*languages)
    if low_accuracy:
        builder = builder.with_low_accuracy_mode()
    detector = builder.build()

    def detect(text: str) -> str:
        found = detector.detect_language_of(text)
        return "" if found is None else found.iso_code_639_1.name.lower()

    return detect


def ours() -> Callable[[str], str]:
    """What the server runs: transformer.inference.langid (py3langid, ranked among the four)."""
    from transformer.inference.langid import LanguageIdentifier

    identifier = LanguageIdentifier()
    return lambda text: identifier.rank(text, among=LANGS)[0][0]


CANDIDATES: dict[str, Callable[[], Callable[[str], str]]] = {
    "py3langid": py3langid_detector,
    "transformer.inference.langid": ours,
    "lingua": lambda: lingua_detector(low_accuracy=False),
    "lingua (low accuracy)": lambda: lingua_detector(low_accuracy=True),
}


def measure(name: str, sides: dict[str, list[str]], *, repeats: int) -> dict[str, object]:
    start = time.perf_counter()
    detect = CANDIDATES[name]()
    detect("warm up")
    build_s = time.perf_counter() - start
    right = {lang: sum(detect(t) == lang for t in texts) / len(texts) for lang, texts in sides.items()}
    everything = [t for texts in sides.values() for t in texts]
    passes = []
    for _ in range(repeats):
        start = time.perf_counter()
        for text in everything:
            detect(text)
        passes.append(time.perf_counter() - start)
    per_sentence_us = statistics.median(passes) / len(everything) * 1e6
    return {"package": name, "accuracy": right, "build_s": round(build_s, 3),
            "per_sentence_us": round(per_sentence_us, 1), "sentences": len(everything)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("TRANSFORMER_DATA", str(ROOT.parent / "shared" / "data")))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "langid.json"))
    args = parser.parse_args()
    sides = read_sides(Path(args.data))
    rows = [measure(name, sides, repeats=args.repeats) for name in CANDIDATES]
    print(f"| package | {' | '.join(LANGS)} | build s | µs/sentence |")
    print("| --- |" + " --- |" * (len(LANGS) + 2))
    for row in rows:
        acc = " | ".join(f"{row['accuracy'][lang]:.1%}" for lang in LANGS)
        print(f"| {row['package']} | {acc} | {row['build_s']} | {row['per_sentence_us']} |")
    Path(args.out).write_text(json.dumps({"machine": describe(), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
