"""`transformer score` on a test split: does forced decoding rank each reference above wrong
translations, and how fast does it score?

Two kinds of wrong translation per source, K of each: another sentence's reference (a shuffle of
the references, no sentence keeping its own), and the reference's own words in a shuffled order
(the same words, so only the order can tell them apart). For each, the share of (reference, wrong
translation) pairs in which the reference scores higher and the share of sources whose reference
scores above all K, by summed log-probability and by its per-token average, and the pairs and target tokens scored per second (one batch budget,
`--threads` threads, the model's precision as `--precision` resolves it).

    transformer train --preset multi30k-cpu --minutes 10 --threads 1 --out runs/m30k
    taskset -c 1 .venv/bin/python benchmarks/scoring.py --model runs/m30k

Prints a table and writes benchmarks/results/scoring.json with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import torch

from machine import describe, require_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
MAKE = "transformer train --preset multi30k-cpu --minutes 10 --threads 1 --out {path}"


def derangement(count: int, rng: random.Random) -> list[int]:
    """A permutation of range(count) that moves every index."""
    while True:
        order = list(range(count))
        rng.shuffle(order)
        if all(i != j for i, j in enumerate(order)):
            return order


def word_shuffle(text: str, rng: random.Random) -> str | None:
    """``text``'s words in another order (None when it has no other order)."""
    words = text.split()
    if len(set(words)) < 2:
        return None
    shuffled = words[:]
    while shuffled == words:
        rng.shuffle(shuffled)
    return " ".join(shuffled)


def ranking(scorer, sources, references, wrong: list[list[str | None]]) -> dict:
    """Share of sources whose reference beats each of its wrong translations (None: none)."""
    from transformer.inference.scoring import score_pairs

    right = score_pairs(scorer, sources, references)
    out = {"sum": 0, "avg": 0, "sources": 0, "pairs": 0, "pair_sum": 0, "pair_avg": 0}
    columns = [score_pairs(scorer, sources, [w or "" for w in column]) for column in wrong]
    for i, r in enumerate(right):
        others = [(column[i], wrong[k][i]) for k, column in enumerate(columns) if wrong[k][i] is not None]
        if not others:
            continue
        out["sources"] += 1
        out["sum"] += all(r.log_prob > s.log_prob for s, _ in others)
        out["avg"] += all(r.log_prob_per_token > s.log_prob_per_token for s, _ in others)
        out["pairs"] += len(others)
        out["pair_sum"] += sum(r.log_prob > s.log_prob for s, _ in others)
        out["pair_avg"] += sum(r.log_prob_per_token > s.log_prob_per_token for s, _ in others)
    n, m = max(out["sources"], 1), max(out["pairs"], 1)
    return {"sources": out["sources"], "first_by_sum": out["sum"] / n, "first_by_avg": out["avg"] / n,
            "pairs": out["pairs"], "above_by_sum": out["pair_sum"] / m,
            "above_by_avg": out["pair_avg"] / m}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/m30k")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TRANSFORMER_DATA", ROOT.parent / "shared" / "data")), help="the shared data folder")
    parser.add_argument("--wrong", type=int, default=4, help="wrong translations of each kind per source")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scoring.json")
    args = parser.parse_args(argv)
    require_model(args.model, script="scoring.py", make=MAKE)
    torch.set_num_threads(args.threads)
    from transformer.data.parallel import read_lines
    from transformer.inference.scoring import load_scorer, score_pairs

    scorer = load_scorer(args.model, precision=args.precision)
    src, tgt = scorer.record.languages
    folder = args.data / "multi30k"
    sources = read_lines(folder / f"{args.split}.{src}.gz")
    references = read_lines(folder / f"{args.split}.{tgt}.gz")
    rng = random.Random(args.seed)
    others = [[references[j] for j in derangement(len(references), rng)] for _ in range(args.wrong)]
    shuffled = [[word_shuffle(r, rng) for r in references] for _ in range(args.wrong)]

    score_pairs(scorer, sources[:64], references[:64])  # warm up
    began = time.perf_counter()
    score_pairs(scorer, sources, references)
    seconds = time.perf_counter() - began
    tokens = sum(len(scorer.tgt_tokenizer.encode(r)) + 1 for r in references)
    result = {"machine": describe(), "command": " ".join(["benchmarks/scoring.py", *sys.argv[1:]]),
              "model": args.model, "split": f"{args.split}.{src}-{tgt}", "pairs": len(sources),
              "precision": scorer.precision, "threads": args.threads, "wrong_per_kind": args.wrong,
              "other_references": ranking(scorer, sources, references, others),
              "shuffled_words": ranking(scorer, sources, references, shuffled),
              "pairs_per_s": len(sources) / seconds, "target_tokens_per_s": tokens / seconds}
    print(f"{args.model} on {result['split']} ({len(sources)} pairs, {scorer.precision}, "
          f"{args.threads} thread): the reference ranked above one wrong translation (pairwise), "
          f"and above all {args.wrong} of a kind (first)")
    print(f"{'wrong translations':<24} {'pairs':>6} {'by sum':>7} {'by avg':>7} {'first sum':>10} {'first avg':>10}")
    for name, key in (("other sentences' refs", "other_references"), ("its words shuffled", "shuffled_words")):
        row = result[key]
        print(f"{name:<24} {row['pairs']:>6} {row['above_by_sum']:>7.3f} {row['above_by_avg']:>7.3f} "
              f"{row['first_by_sum']:>10.3f} {row['first_by_avg']:>10.3f}")
    print(f"speed: {result['pairs_per_s']:.0f} pairs/s, {result['target_tokens_per_s']:.0f} target tokens/s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
