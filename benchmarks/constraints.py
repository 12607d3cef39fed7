"""Terminology by lexically constrained beam search: with oracle constraints from the references,
how many are met and what BLEU does, and what the constraints cost in speed.

Post & Vilar's (2018) oracle test: each sentence of a test split gets one or two words of its
own reference as constraints (here German nouns: capitalised words other than the first, of
three letters or more, that the target vocabulary spells without unknown pieces; a sentence
without one gets none). The split is translated with beam search without and with them: the
share of constraints that appear in the output (as whole words), and BLEU (sacreBLEU). Speed:
one batch of ``--batch-size`` sentences that all have two constraints, plain beam against
constrained beam, timed alternately (``--repeats`` each, the median), one thread.

    transformer train --preset multi30k-cpu --minutes 10 --threads 1 --out runs/m30k
    taskset -c 1 .venv/bin/python benchmarks/constraints.py --model runs/m30k --threads 1

Prints a table and writes benchmarks/results/constraints.json with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path

import torch

from machine import describe, require_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
MAKE = "transformer train --preset multi30k-cpu --minutes 10 --threads 1 --out {path}"


def oracle(reference: str, rng: random.Random, spells, most: int = 2) -> list[str]:
    """One to ``most`` nouns of ``reference`` (capitalised, not first, 3+ letters), chosen by
    ``rng``, in reference order; ``spells(word)``: whether the target vocabulary spells it."""
    words = [w.strip(".,;:!?\"'()") for w in reference.split()[1:]]
    nouns = list(dict.fromkeys(w for w in words if len(w) >= 3 and w[0].isupper() and w.isalpha() and spells(w)))
    if not nouns:
        return []
    chosen = rng.sample(nouns, min(len(nouns), rng.randint(1, most)))
    return [w for w in nouns if w in chosen]


def met(text: str, phrases: list[str]) -> int:
    return sum(bool(re.search(rf"(?<!\w){re.escape(p)}(?!\w)", text)) for p in phrases)


def timed(run, repeats: int) -> list[float]:
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - began)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/m30k")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TRANSFORMER_DATA", ROOT.parent / "shared" / "data")), help="the shared data folder")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N of the split")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16, help="of the speed test")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "constraints.json")
    args = parser.parse_args(argv)
    require_model(args.model, script="constraints.py", make=MAKE)
    torch.set_num_threads(args.threads)
    from transformer.data.parallel import read_lines
    from transformer.data.tokenizer import UNK_ID
    from transformer.evaluation.bleu import score_translations
    from transformer.inference.loader import load_translator

    translator = load_translator(args.model, beam_size=args.beam, precision=args.precision, engine="torch")
    src, tgt = translator.record.languages
    folder = args.data / "multi30k"
    sources = read_lines(folder / f"{args.split}.{src}.gz")[: args.sentences]
    references = read_lines(folder / f"{args.split}.{tgt}.gz")[: args.sentences]
    rng = random.Random(args.seed)

    def spells(word: str) -> bool:
        return UNK_ID not in translator.tgt_tokenizer.encode(word)

    phrases = [oracle(r, rng, spells) for r in references]
    results: dict = {}
    for name, given in (("plain", None), ("constrained", phrases)):
        began = time.perf_counter()
        texts = [t.text for t in translator.translate(sources, constraints=given)]
        seconds = time.perf_counter() - began
        scores = score_translations(texts, references, metrics=("bleu",))
        results[name] = {"bleu": scores.bleu, "constraints_met": sum(met(t, p) for t, p in zip(texts, phrases, strict=True)),
                         "seconds": seconds, "examples": [list(x) for x in zip(sources[:3], texts[:3], phrases[:3], strict=True)]}
    total = sum(map(len, phrases))

    two = [(s, p) for s, p in zip(sources, phrases, strict=True) if len(p) == 2][: args.batch_size]
    batch, batch_phrases = [s for s, _ in two], [p for _, p in two]
    translator.batch_size = len(batch)
    translator.translate(batch), translator.translate(batch, constraints=batch_phrases)  # warm up
    plain_s, constrained_s = [], []
    for _ in range(args.repeats):  # alternately, so that drift in the machine's speed hits both
        plain_s += timed(lambda: translator.translate(batch), 1)
        constrained_s += timed(lambda: translator.translate(batch, constraints=batch_phrases), 1)
    speed = {"batch": len(batch), "plain_ms": 1000 * statistics.median(plain_s),
             "constrained_ms": 1000 * statistics.median(constrained_s)}
    speed["ratio"] = speed["constrained_ms"] / speed["plain_ms"]
    out = {"machine": describe(), "command": " ".join(["benchmarks/constraints.py", *sys.argv[1:]]),
           "model": args.model, "split": f"{args.split}.{src}-{tgt}", "sentences": len(sources),
           "beam": args.beam, "precision": translator.precision, "threads": args.threads,
           "constraints": total, "sentences_with_constraints": sum(bool(p) for p in phrases),
           "plain": results["plain"], "constrained": results["constrained"], "speed": speed}
    print(f"{args.model} on {out['split']}: {len(sources)} sentences, {total} oracle constraints "
          f"({out['sentences_with_constraints']} sentences), beam {args.beam}, {translator.precision}, "
          f"{args.threads} thread")
    print(f"{'search':<12} {'BLEU':>6} {'met':>12} {'seconds':>8}")
    for name in ("plain", "constrained"):
        row = results[name]
        print(f"{name:<12} {row['bleu']:>6.2f} {row['constraints_met']:>5}/{total:<5} "
              f"({100 * row['constraints_met'] / max(total, 1):.1f}%) {row['seconds']:>8.1f}")
    print(f"speed, batch {speed['batch']} with two constraints each: plain {speed['plain_ms']:.0f} ms, "
          f"constrained {speed['constrained_ms']:.0f} ms ({speed['ratio']:.2f}x), median of {args.repeats}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
