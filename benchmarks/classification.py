"""Classification targets on a CPU: NSMC accuracy and GoEmotions macro-F1 with the 30-minute presets.

For each corpus it trains the ``<corpus>-cpu`` preset (tokenizer, model, the shared Trainer,
thresholds on the held-out validation split) and scores data the model never trained or tuned on:

- ``nsmc``: accuracy on the 10,000-review test split held out of ratings_train (the validation
  split, 5,000 more, is held out apart); target >= 0.85 (from-scratch Transformer of the tutorial
  lineage: 0.831; CNN from scratch: 0.864).
- ``goemotions``: macro-F1 on dev.tsv with per-label thresholds tuned on a part of train; target
  >= 0.35 (fine-tuned BERT: 0.46; from-scratch Transformer: 0.23).

    .venv/bin/python benchmarks/classification.py --data nsmc         # ~30 minutes
    .venv/bin/python benchmarks/classification.py --data goemotions   # up to ~30 minutes
    .venv/bin/python benchmarks/classification.py --data nsmc --minutes 3 --threads 1   # a smoke run

Writes ``benchmarks/results/classification.json`` (one entry per corpus, merged with earlier runs)
and the model directories under ``--runs`` (default ``runs/``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import time
from pathlib import Path

import torch

from machine import cpu_name, describe  # benchmarks/machine.py
from transformer.atomic import atomic_write_text
from transformer.config import classifier_config
from transformer.data.classification_splits import resolve_splits
from transformer.training.train_classifier import train_classifier

RESULTS = Path(__file__).resolve().parent / "results" / "classification.json"
TARGETS = {"nsmc": ("test", "accuracy", 0.85), "goemotions": ("dev", "macro_f1", 0.35)}


def run(name: str, *, runs: Path, minutes: float | None) -> dict:
    split, metric, target = TARGETS[name]
    overrides = {} if minutes is None else {"minutes": minutes}
    config = classifier_config(f"{name}-cpu", overrides)
    started = time.monotonic()
    splits, recipe, info = resolve_splits(data=name)
    summary = train_classifier(splits, config=config, run_dir=runs / name, recipe=recipe,
                               data_info={**info, "preset": f"{name}-cpu"})
    value = summary["splits"][split][metric]
    return {
        "corpus": name, "preset": f"{name}-cpu", "split": split, "metric": metric, "value": value,
        "target": target, "met": value >= target, "valid": summary["splits"]["valid"][metric],
        "wall_s": round(time.monotonic() - started, 1), "train_s": summary["train_s"],
        "epochs": summary["epochs"], "steps": summary["steps"], "best_step": summary["best_step"],
        "stopped_by": summary["stopped_by"], "tokens_per_s": summary["tokens_per_s"],
        "parameters": summary["parameters"], "config": config.to_dict(),
        "command": f"transformer classify train --preset {name}-cpu --out {runs / name}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=(*TARGETS, "both"), default="both")
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="parent of the model directories")
    parser.add_argument("--minutes", type=float, help="override the presets' training budget")
    parser.add_argument("--threads", type=int, help="torch threads (default: all cores)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if args.threads:
        torch.set_num_threads(args.threads)
    names = list(TARGETS) if args.data == "both" else [args.data]
    rows = [run(name, runs=args.runs, minutes=args.minutes) for name in names]

    print(f"\n{'corpus':<11} {'split':<5} {'metric':<9} {'value':>6} {'target':>6} {'met':>4} "
          f"{'valid':>6} {'epochs':>6} {'train':>7} {'wall':>7} {'tok/s':>7}")
    for r in rows:
        print(f"{r['corpus']:<11} {r['split']:<5} {r['metric']:<9} {r['value']:6.4f} {r['target']:6.2f} "
              f"{'yes' if r['met'] else 'NO':>4} {r['valid']:6.4f} {r['epochs']:6.2f} "
              f"{r['train_s'] / 60:6.1f}m {r['wall_s'] / 60:6.1f}m {r['tokens_per_s']:7,d}")

    machine = {"cpu": cpu_name(), "hardware": describe(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
               "torch": torch.__version__, "platform": platform.platform()}
    results = {}
    if args.output.is_file():
        results = json.loads(args.output.read_text()).get("runs", {})
    results.update({r["corpus"]: {**r, "machine": machine} for r in rows})
    args.output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.output, json.dumps({"runs": results}, indent=2, sort_keys=True) + "\n")
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
