"""Tagged back-translation on Multi30k: does German text without its English help an
English -> German model trained on little data?

Multi30k's 29,000 training pairs are cut in two halves by line: A (the first 14,500 pairs) is the
parallel data, B (the other 14,500) gives only its German side. The real commands:

1. ``transformer train --preset multi30k-cpu`` German -> English on A (the reverse model);
2. ``transformer translate`` of B's German with it, sampling (top-k 10, seed 1): synthetic
   English sources for B's German (Edunov et al. 2018: sampled sources teach more than beam's);
3. ``transformer prepare --tags ',<BT>'``: A untagged and the synthetic pairs tagged ``<BT>``
   (Caswell et al. 2019), validated on the untagged validation split;
4. English -> German, the same recipe and minutes, on A alone (``--train-src``) and on A plus the
   synthetic pairs (``--data-dir``), both at once, one core and one thread each (``taskset``), so
   both see the same machine;
5. ``transformer evaluate`` of both on test_2016_flickr with its defaults (beam 4, length penalty
   0.6): nothing is chosen on the test set.

Each training run gets ``--minutes`` (default 15). Writes ``benchmarks/results/back_translation.json``
and prints a table.

    .venv/bin/python benchmarks/back_translation.py                         # about 35 minutes
    .venv/bin/python benchmarks/back_translation.py --minutes 0.1 --pairs 300 --work /tmp/bt-smoke --out /tmp/bt.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from machine import describe  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parent
HALF = 14_500
TAG = "<BT>"


def transformer(*args: str, core: int | None = None) -> list[str]:
    pin = ["taskset", "-c", str(core)] if core is not None else []
    return [*pin, sys.executable, "-m", "transformer", *args]


def run(command: list[str], log: Path) -> None:
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n"
                         f"{log.read_text()[-2000:]}")


def write_halves(work: Path, half: int) -> None:
    """A.en, A.de (the first ``half`` pairs), B.de (the next ``half`` pairs' German), val.en,
    val.de."""
    from transformer.data.corpora import load_corpus

    train = load_corpus("multi30k", "train", "en", "de")
    val = load_corpus("multi30k", "val", "en", "de")
    files = {"A.en": train.src[:half], "A.de": train.tgt[:half], "B.de": train.tgt[half:2 * half],
             "val.en": val.src, "val.de": val.tgt}
    for name, lines in files.items():
        (work / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def recipe(minutes: float, out: Path, vocab: int | None = None) -> list[str]:
    """The recipe's training command (``vocab``: its tokenizer's size, when it trains one)."""
    sized = [] if vocab is None else ["--vocab-size", str(vocab)]
    return ["train", "--preset", "multi30k-cpu", "--minutes", str(minutes), "--threads", "1",
            *sized, "--no-progress", "--out", str(out)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="of each training run")
    parser.add_argument("--work", type=Path, default=Path("runs/back-translation"))
    parser.add_argument("--topk", type=int, default=10, help="sampling's top-k (0: the whole "
                        "distribution)")
    parser.add_argument("--pairs", type=int, default=HALF, help="pairs in each half (default "
                        "14,500: the whole training split; fewer for a smoke run)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="the recipe's (default 8000)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "back_translation.json")
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    began = time.time()
    write_halves(work, args.pairs)
    w = {name: str(work / name) for name in ("A.en", "A.de", "B.de", "val.en", "val.de")}

    def files(src: str, tgt: str) -> list[str]:
        return ["--train-src", w[f"A.{src}"], "--train-tgt", w[f"A.{tgt}"],
                "--valid-src", w[f"val.{src}"], "--valid-tgt", w[f"val.{tgt}"]]

    reverse = work / "A.de-en"
    run(transformer(*recipe(args.minutes, reverse, args.vocab_size), *files("de", "en"), core=1),
        work / "A.de-en.log")
    synthetic = work / "B.bt.en"
    run(transformer("translate", "--model", str(reverse), "-i", w["B.de"], "-o", str(synthetic),
                    "--sampling", "--sampling-topk", str(args.topk), "--seed", "1", "--threads",
                    "2", "--no-progress"), work / "translate.log")
    data = work / "data-A-BT"
    run(transformer("prepare", "--train-src", f"{w['A.en']},{synthetic}", "--train-tgt",
                    f"{w['A.de']},{w['B.de']}", "--tags", f",{TAG}", "--valid-src", w["val.en"],
                    "--valid-tgt", w["val.de"], "--vocab-size", str(args.vocab_size),
                    "--workers", "2", "--out", str(data), "--no-progress"), work / "prepare.log")

    runs = {"A": work / "A.en-de", "A+BT": work / "A-BT.en-de"}
    commands = {
        "A": transformer(*recipe(args.minutes, runs["A"], args.vocab_size), *files("en", "de"), core=0),
        "A+BT": transformer(*recipe(args.minutes, runs["A+BT"]), "--data-dir", str(data), core=1),
    }
    logs = {name: (work / f"{name}.log").open("w") for name in commands}
    procs = {name: subprocess.Popen(c, stdout=logs[name], stderr=subprocess.STDOUT)
             for name, c in commands.items()}
    for name, proc in procs.items():
        if proc.wait() != 0:
            raise SystemExit(f"failed: {' '.join(commands[name])}\n"
                             f"{(work / f'{name}.log').read_text()[-2000:]}")

    rows = {}
    for name, path in runs.items():
        done = subprocess.run(transformer("evaluate", "--model", str(path), "--data", "multi30k",
                                          "--split", "test_2016_flickr", "--threads", "2",
                                          "--json", "--no-progress"),
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"evaluate {path} failed:\n{done.stderr[-2000:]}")
        score = json.loads(done.stdout.strip().splitlines()[-1])
        record = json.loads((path / "config.json").read_text())
        metrics = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
        updates = max((m["step"] for m in metrics if "step" in m), default=0)  # the last record's
        rows[name] = {"bleu": round(score["bleu"], 2), "chrf": round(score["chrf"], 2),
                      "bleu_signature": score["bleu_signature"],
                      "valid_bleu": record["best_validation"]["bleu"], "updates": updates}
    pairs = {"A": args.pairs, "A+BT": 2 * args.pairs}
    print(f"{'training data':<28} {'pairs':>7} {'updates':>8} {'valid BLEU':>11} {'test BLEU':>10}")
    for name, row in rows.items():
        print(f"{name:<28} {pairs[name]:>7,} {row['updates']:>8,} {row['valid_bleu']:>11.2f} "
              f"{row['bleu']:>10.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "minutes_per_run": args.minutes, "sampling_topk": args.topk, "tag": TAG, "half": args.pairs,
        "runs": rows, "seconds": round(time.time() - began), "machine": describe(),
        "command": " ".join(sys.argv)}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
