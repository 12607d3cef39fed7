"""Speed of two source trees of this project side by side: a benchmark run against each, alternating.

A refactoring must not cost speed; this measures that. Each round runs the chosen benchmark once
with the OLD tree's package and script and once with the NEW tree's (order alternating between
rounds, so drift in the machine's speed hits both alike), each in a fresh process; per row the best
round of each tree counts and the table shows new / old.

    # the commit before a change, checked out beside this one:
    git worktree add /tmp/old <commit>
    taskset -c 1 .venv/bin/python benchmarks/compare_trees.py --old /tmp/old --new . decoding
    taskset -c 1 .venv/bin/python benchmarks/compare_trees.py --old /tmp/old --new . training

Benchmarks: ``decoding`` (benchmarks/decoding.py without Hugging Face and the uncached runs:
cached greedy and beam-5 tokens/s) and ``training`` (benchmarks/train_throughput.py: tokens/s of
our model and of ours+opts, the trainer's loss and optimizer; the "/ torch" rows are each one's
ratio to torch.nn.Transformer timed in the same process, free of drift between processes). Prints
a table and writes JSON
(default benchmarks/results/compare_trees-<benchmark>.json).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import describe  # benchmarks/machine.py

RESULTS = Path(__file__).resolve().parent / "results"

# benchmark -> (script, arguments, quick arguments)
BENCHMARKS = {
    "decoding": ("benchmarks/decoding.py",
                 ["--suite", "cache", "--no-hf", "--uncached-repeats", "0", "--repeats", "3"],
                 ["--suite", "cache", "--quick", "--no-hf", "--uncached-repeats", "0"]),
    "training": ("benchmarks/train_throughput.py", ["--threads", "1", "--rounds", "3"],
                 ["--quick", "--threads", "1"]),
}


def speeds(benchmark: str, result: dict) -> dict[str, float]:
    """Row name -> tokens per second, from one run's JSON."""
    out = {}
    if benchmark == "decoding":
        for row in result["rows"]:
            out[f"{row['method']} len {row['length']}"] = row["tokens_per_s"]["cache"]
    else:
        for row in result["rows"]:
            for who in ("ours", "ours+opts"):
                out[f"{who} d{row['d_model']} {row['precision']}"] = row[f"{who}_tokens_per_s"]
                # against torch.nn.Transformer timed in the same process: drift-free
                out[f"{who} d{row['d_model']} {row['precision']} / torch"] = row[f"{who}_vs_torch"]
    return out


def run_once(tree: Path, benchmark: str, *, quick: bool, extra: list[str]) -> dict[str, float]:
    """One run of ``benchmark`` with ``tree``'s script and package, in a fresh process."""
    script, args, quick_args = BENCHMARKS[benchmark]
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "result.json"
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}
        command = [sys.executable, str(tree / script), *(quick_args if quick else args), *extra,
                   "--output", str(output)]
        done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{tree}: {script} failed:\n{done.stderr[-2000:]}")
        return speeds(benchmark, json.loads(output.read_text()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark", choices=sorted(BENCHMARKS))
    parser.add_argument("--old", type=Path, required=True, help="the tree before the change")
    parser.add_argument("--new", type=Path, default=Path("."), help="the tree after (default .)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of each benchmark")
    parser.add_argument("--output", type=Path, help="JSON file (default results/compare_trees-*)")
    args, extra = parser.parse_known_args()  # anything else goes to the benchmark itself
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    for name, tree in trees.items():
        if not (tree / "src" / "transformer").is_dir():
            parser.error(f"--{name} {tree}: no src/transformer inside")

    best: dict[str, dict[str, float]] = {"old": {}, "new": {}}
    for round_ in range(args.rounds):
        order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
        for name in order:
            for row, value in run_once(trees[name], args.benchmark, quick=args.quick,
                                       extra=extra).items():
                best[name][row] = max(best[name].get(row, 0.0), value)
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    rows = [{"row": row, "old": best["old"][row], "new": best["new"][row],
             "new_over_old": round(best["new"][row] / best["old"][row], 3)}
            for row in best["old"] if row in best["new"]]
    print(f"{'row':32} {'old':>10} {'new':>10} {'new/old':>8}   (tokens/s, or a ratio)")
    for r in rows:
        print(f"{r['row']:32} {r['old']:10.4g} {r['new']:10.4g} {r['new_over_old']:8.3f}")
    output = args.output or (Path(tempfile.gettempdir()) if args.quick else RESULTS) / \
        f"compare_trees-{args.benchmark}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"benchmark": args.benchmark, "hardware": describe(), "rounds": args.rounds,
                                  "trees": {k: str(v) for k, v in trees.items()},
                                  "benchmark_args": extra, "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
