"""Word alignments from cross-attention, every rule measured: each decoder layer, the average over
its heads and each head alone, and the decoder row that stands for a target piece (the one that
predicts it, "output", or the one that reads it, "input"); the rule transformer.inference.alignment
uses (DEFAULT_RULE) is marked.

- The demo task against its known alignment (benchmarks/alignment_gold.py: German morphemes to
  English words; the model reads the reference, teacher-forced, as AER is measured).
- A Multi30k model against eflomal's alignment of test_2016_flickr (silver: sure where both
  directions agree, possible where either links), whitespace words as `translate --alignments`
  prints them.

    transformer demo --threads 1 --out runs/demo
    transformer train --preset multi30k-cpu --minutes 10 --threads 1 --out runs/m30k
    taskset -c 1 .venv/bin/python benchmarks/alignment.py --demo runs/demo --multi30k runs/m30k

Prints a table per model (AER, precision, recall; lower AER is better) and writes
benchmarks/results/alignment.json with the machine. Needs eflomal for Multi30k (the bench extra).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from alignment_gold import aer, diagonal, eflomal_links, number_alignment, unit_spans  # benchmarks/
from machine import describe, require_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
DEMO_MAKE = "transformer demo --threads 1 --out {path}"
M30K_MAKE = "transformer train --preset multi30k-cpu --minutes 10 --threads 1 --out {path}"


def rules(layers: int, heads: int) -> list:
    from transformer.inference.alignment import AlignmentRule

    return [AlignmentRule(layer=layer, head=head, row=row) for layer in range(1, layers + 1)
            for head in (None, *range(1, heads + 1)) for row in ("output", "input")]


def name(rule, layers: int) -> str:
    from transformer.inference.alignment import DEFAULT_RULE

    layer = rule.layer if rule.layer > 0 else layers + 1 + rule.layer
    default = DEFAULT_RULE.layer if DEFAULT_RULE.layer > 0 else layers + 1 + DEFAULT_RULE.layer
    mark = " *" if (layer, rule.head, rule.row) == (default, DEFAULT_RULE.head, DEFAULT_RULE.row) else ""
    return f"layer {layer}, {'heads averaged' if rule.head is None else f'head {rule.head}'}, {rule.row}{mark}"


def measure(loaded, sources, targets, src_units, tgt_units, sure, possible) -> list[dict]:
    """AER of every rule on pairs whose units are given as non-space spans per pair."""
    from transformer.inference.alignment import cross_attention, membership, piece_spans, word_pairs

    model, src_tok, tgt_tok = loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer
    limit = model.config.max_len
    src_ids = [src_tok.encode(s)[:limit] for s in sources]
    tgt_ids = [tgt_tok.encode(t)[: limit - 1] for t in targets]
    maps = cross_attention(model, list(zip(src_ids, tgt_ids, strict=True)))
    members = [(membership(piece_spans(src_tok, s), su), membership(piece_spans(tgt_tok, t), tu))
               for s, t, su, tu in zip(src_ids, tgt_ids, src_units, tgt_units, strict=True)]
    layers, heads = maps[0].shape[:2]
    rows = []
    for rule in rules(layers, heads):
        found = [set(word_pairs(m, sm, tm, rule=rule)) for m, (sm, tm) in zip(maps, members, strict=True)]
        rows.append({"rule": name(rule, layers), "layer": rule.layer, "head": rule.head,
                     "row": rule.row, **aer(found, sure, possible)})
    return rows


def demo_rows(run: str) -> dict:
    """The demo's test split (seed of the run) against the known morpheme alignment."""
    from transformer.data.builtin_task import english_number, german_number, number_task_numbers
    from transformer.model_dir import load_model_dir

    loaded = load_model_dir(run)
    seed = int((loaded.record.section("demo") or {}).get("seed", 0))
    numbers = number_task_numbers(seed)["test"]
    sources, targets = [english_number(n) for n in numbers], [german_number(n) for n in numbers]
    units = [number_alignment(n) for n in numbers]  # (en, de, sure, possible)
    sure, possible = [u[2] for u in units], [u[3] for u in units]
    return {"model": run, "pairs": len(sources), "reference": "known morpheme alignment",
            "diagonal_baseline": aer([diagonal(len(u[0]), len(u[1])) for u in units], sure, possible),
            "rules": measure(loaded, sources, targets,
                             [unit_spans(s, u[0]) for s, u in zip(sources, units, strict=True)],
                             [unit_spans(t, u[1]) for t, u in zip(targets, units, strict=True)],
                             sure, possible)}


def multi30k_rows(run: str, data: Path) -> dict:
    """test_2016_flickr against eflomal's links, trained on train + test."""
    from transformer.data.parallel import read_lines
    from transformer.inference.alignment import word_spans
    from transformer.model_dir import load_model_dir

    loaded = load_model_dir(run)
    src, tgt = loaded.record.languages
    folder = data / "multi30k"
    train_src, train_tgt = read_lines(folder / f"train.{src}.gz"), read_lines(folder / f"train.{tgt}.gz")
    sources = read_lines(folder / f"test_2016_flickr.{src}.gz")
    targets = read_lines(folder / f"test_2016_flickr.{tgt}.gz")
    silver = eflomal_links(train_src + sources, train_tgt + targets,
                           keep=range(len(train_src), len(train_src) + len(sources)))
    sure, possible = [s for s, _ in silver], [p for _, p in silver]
    return {"model": run, "pairs": len(sources), "reference": "eflomal, train + test, both directions",
            "diagonal_baseline": aer([diagonal(len(s.split()), len(t.split()))
                                   for s, t in zip(sources, targets, strict=True)], sure, possible),
            "rules": measure(loaded, sources, targets, [word_spans(s) for s in sources],
                             [word_spans(t) for t in targets], sure, possible)}


def table(title: str, result: dict) -> str:
    base = result["diagonal_baseline"]
    lines = [f"\n{title}: {result['model']}, {result['pairs']} pairs, against the "
             f"{result['reference']} (diagonal baseline AER {base['aer']:.3f})",
             f"{'rule':<36} {'AER':>6} {'prec':>6} {'recall':>6}"]
    for row in result["rules"]:
        lines.append(f"{row['rule']:<36} {row['aer']:>6.3f} {row['precision']:>6.3f} {row['recall']:>6.3f}")
    best = min(result["rules"], key=lambda r: r["aer"])
    lines.append(f"best: {best['rule']} (AER {best['aer']:.3f}); * = DEFAULT_RULE")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", default="runs/demo", help="a `transformer demo` run")
    parser.add_argument("--multi30k", default=None, help="a Multi30k run (skipped when absent)")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TRANSFORMER_DATA", ROOT.parent / "shared" / "data")), help="the shared data folder")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "alignment.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    require_model(args.demo, script="alignment.py", make=DEMO_MAKE)
    results = {"machine": describe(), "command": " ".join(["benchmarks/alignment.py", *sys.argv[1:]]),
               "demo": demo_rows(args.demo)}
    print(table("demo (numbers en-de)", results["demo"]))
    if args.multi30k:
        require_model(args.multi30k, script="alignment.py", make=M30K_MAKE)
        results["multi30k"] = multi30k_rows(args.multi30k, args.data)
        print(table("Multi30k", results["multi30k"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
