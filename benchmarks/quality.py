"""Translation quality per CPU-hour: train the ``multi30k-cpu`` recipe and score it on Multi30k.

For each direction (English->German and German->English by default) it runs the real commands:

1. ``transformer train --preset multi30k-cpu --src S --tgt T --threads N``: one direction after
   the other, each with all cores (the recipe's own budget: 60 minutes, its cool-down placed by the
   time left; ``--minutes M`` replaces it); ``--parallel`` trains both at the same time with one
   thread each instead;
2. decoding settings are chosen on the validation split only (beam size and length penalty, best
   validation BLEU; greedy is always reported too);
3. ``transformer evaluate --split test_2016_flickr``: detokenized cased sacreBLEU (the target),
   chrF, and BLEU on lowercased 13a-tokenized text (what papers on Multi30k report).

Writes ``benchmarks/results/quality.json``, prints a table (Markdown, as the README quotes it) and
draws validation BLEU against minutes of training for the runs (``transformer plot curves --x
minutes``).

    .venv/bin/python benchmarks/quality.py                       # the recipe, 2 x 60 minutes
    .venv/bin/python benchmarks/quality.py --skip-train --runs runs/quality   # score existing runs

Scoring (the decoding grid on validation, then test) runs one process per direction at once,
sharing the threads.
    .venv/bin/python benchmarks/quality.py --minutes 1 --directions en-de --runs /tmp/q  # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from machine import cpu_name, describe, require_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "quality.json"
TEST_SPLIT = "test_2016_flickr"
# (beam, length penalty) tried on the validation split; beam 1 is greedy
DECODING_GRID = ((1, 0.6), (4, 0.6), (4, 1.0), (4, 1.5), (4, 2.0), (5, 0.6), (5, 1.0), (5, 1.5),
                 (5, 2.0))


def transformer(*args: str, threads: int) -> list[str]:
    return [sys.executable, "-m", "transformer", *args, "--threads", str(threads)]


def run_json(command: list[str]) -> dict:
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def train(directions: list[tuple[str, str]], runs: Path, args: argparse.Namespace) -> dict:
    """Train every direction (at once, or one after another); returns each run's summary."""
    commands = {}
    for src, tgt in directions:
        out = runs / f"{src}-{tgt}"
        threads = 1 if args.parallel else args.threads
        budget = ["--minutes", str(args.minutes)] if args.minutes is not None else []
        commands[f"{src}-{tgt}"] = transformer(
            "train", "--preset", args.preset, "--src", src, "--tgt", tgt, *budget,
            "--out", str(out), "--overwrite", "--no-progress", "--json",
            *args.train_args, threads=threads)
    summaries: dict[str, dict] = {}
    if not args.parallel:
        for name, command in commands.items():
            print("$", " ".join(command[1:]), flush=True)
            summaries[name] = run_json(command)
            (runs / name / "summary.json").write_text(json.dumps(summaries[name], indent=2) + "\n")
        return summaries
    logs = {name: open(runs / f"{name}.log", "w", encoding="utf-8") for name in commands}  # noqa: SIM115
    procs = {}
    for name, command in commands.items():
        print("$", " ".join(command[1:]), f"  (log: {runs / (name + '.log')})", flush=True)
        procs[name] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=logs[name], text=True)
    for name, proc in procs.items():
        out, _ = proc.communicate()
        logs[name].close()
        if proc.returncode != 0:
            raise SystemExit(f"training {name} failed ({proc.returncode}); see {runs / (name + '.log')}")
        summaries[name] = json.loads(out.strip().splitlines()[-1])
    for name, summary in summaries.items():  # kept for a later --skip-train
        (runs / name / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summaries


def evaluate(run: Path, split: str, beam: int, penalty: float, threads: int) -> dict:
    return run_json(transformer(
        "evaluate", "--model", str(run), "--data", "multi30k", "--split", split, "--beam",
        str(beam), "--length-penalty", str(penalty), "--json", threads=threads))


def score(run: Path, threads: int) -> dict:
    """Decoding chosen on validation, then the test split: greedy and the chosen beam."""
    valid = []
    for beam, penalty in DECODING_GRID:
        result = evaluate(run, "val", beam, penalty, threads)
        valid.append({"beam": beam, "length_penalty": penalty, "bleu": result["bleu"]})
        print(f"  {run.name} val beam {beam} lp {penalty}: BLEU {result['bleu']:.2f}", flush=True)
    chosen = max(valid, key=lambda r: r["bleu"])
    test = {}
    for label, beam, penalty in (("greedy", 1, 0.6),
                                 ("chosen", chosen["beam"], chosen["length_penalty"])):
        result = evaluate(run, TEST_SPLIT, beam, penalty, threads)
        test[label] = {k: result[k] for k in ("bleu", "chrf", "bleu_lc", "bleu_signature",
                                              "bleu_lc_signature", "beam", "length_penalty")}
    return {"validation_decoding": valid, "chosen": chosen, "test": test}


def run_facts(run: Path) -> dict:
    """Updates, epochs and training seconds of a run without summary.json, from metrics.jsonl."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    timed = [r for r in records if "elapsed_s" in r]
    if not timed:
        return {}
    last = timed[-1]
    speeds = [r["tokens_per_s"] for r in records if r.get("kind") == "train" and "tokens_per_s" in r]
    return {"steps": last["step"], "epochs": round(last["epoch"], 2), "train_s": last["elapsed_s"],
            "tokens_per_s": round(sum(speeds) / len(speeds)) if speeds else None}


def validation_curve(run: Path) -> list[dict]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    return [{"step": r["step"], "minutes": round(r["elapsed_s"] / 60, 2), "bleu": round(r["bleu"], 2)}
            for r in records if r.get("kind") == "valid" and "bleu" in r]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=None,
                        help="training budget per direction (default: the recipe's)")
    parser.add_argument("--directions", nargs="+", default=["en-de", "de-en"])
    parser.add_argument("--preset", default="multi30k-cpu")
    parser.add_argument("--runs", type=Path, default=Path("runs/quality"), help="run directories")
    parser.add_argument("--parallel", action="store_true",
                        help="train the directions at the same time, one thread each")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads of training (one direction at a time) and, shared by the "
                             "directions, of evaluation (default: all cores)")
    parser.add_argument("--skip-train", action="store_true", help="score the runs already in --runs")
    parser.add_argument("--plot", type=Path, default=None,
                        help="BLEU-against-minutes picture (default RUNS/bleu-minutes.png)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("train_args", nargs=argparse.REMAINDER,
                        help="after --: more flags for transformer train (override the recipe)")
    args = parser.parse_args()
    args.train_args = [a for a in args.train_args if a != "--"]
    directions = [tuple(d.split("-")) for d in args.directions]
    args.runs.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    if args.skip_train:
        for src, tgt in directions:
            require_model(args.runs / f"{src}-{tgt}", script="benchmarks/quality.py --skip-train",
                          make=f".venv/bin/python benchmarks/quality.py --directions {src}-{tgt} "
                          f"--runs {args.runs}  # trains it (the recipe: 60 minutes)")
    summaries = {} if args.skip_train else train(directions, args.runs, args)

    names = [f"{src}-{tgt}" for src, tgt in directions]
    with ThreadPoolExecutor(max_workers=len(names)) as pool:  # directions are scored at once
        threads = max(1, args.threads // len(names))
        scores = dict(zip(names, pool.map(lambda n: score(args.runs / n, threads), names),
                          strict=True))
    rows = []
    for name in names:
        run = args.runs / name
        config = json.loads((run / "config.json").read_text())
        summary = summaries.get(name, {})
        if not summary and (run / "summary.json").is_file():
            summary = json.loads((run / "summary.json").read_text())
        if not summary:  # trained by hand (transformer train): what metrics.jsonl says
            summary = run_facts(run)
        scored = scores[name]
        curve = validation_curve(run)
        averaged = config.get("best_validation", {}).get("averaged_steps")
        rows.append({
            "direction": name, "run": str(run), "parameters": summary.get("parameters"),
            "train_minutes": round(summary["train_s"] / 60, 1) if summary else None,
            "updates": summary.get("steps"), "epochs": summary.get("epochs"),
            "tokens_per_s": summary.get("tokens_per_s"),
            "model": "average of updates " + ", ".join(map(str, averaged)) if averaged
            else "best single model by validation BLEU",
            "validation_bleu_greedy": config.get("best_validation", {}).get("bleu"),
            "validation_curve": curve, **scored,
        })
    plot = args.plot or args.runs / "bleu-minutes.png"
    subprocess.run([sys.executable, "-m", "transformer", "plot", "curves",
                    *(str(args.runs / d) for d in args.directions), "--x", "minutes",
                    "--out", str(plot)], check=True, capture_output=True)

    print()
    budget = f"{args.minutes:g} minutes" if args.minutes is not None else f"the {args.preset} budget"
    print(f"Multi30k {TEST_SPLIT}, {budget} of training per direction, {cpu_name()}")
    print("| direction | updates | BLEU greedy | BLEU (beam, lp) | chrF | lc tok BLEU |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        g, c = r["test"]["greedy"], r["test"]["chosen"]
        print(f"| {r['direction']} | {r['updates'] or '-'} | {g['bleu']:.1f} | {c['bleu']:.1f} "
              f"({c['beam']}, {c['length_penalty']}) | {c['chrf']:.1f} | {c['bleu_lc']:.1f} |")
    result = {
        "benchmark": "quality",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": cpu_name(), "hardware": describe(), "minutes": args.minutes, "preset": args.preset,
        "parallel": args.parallel, "threads": 1 if args.parallel else args.threads,
        "wall_minutes": round((time.monotonic() - start) / 60, 1),
        "plot": str(plot), "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output} and {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
