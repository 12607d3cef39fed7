"""Start-up: how long the commands that need no tensor take, whole process, start to exit.

    taskset -c 1 python benchmarks/startup.py --model RUN_DIR [--repeats 5]

Times ``import torch`` (for scale), ``transformer --help``, ``transformer translate --help``,
``transformer version`` and translating one sentence with ``--engine auto`` (CTranslate2 where auto
picks it, the run converted once before timing) and ``--engine ctranslate2``, each a fresh process
(``python -m transformer``), alternating within each repeat; prints min, median and max seconds,
whether the command imported PyTorch, and writes JSON (``benchmarks/results/startup.json``). Pin
it to one core (``taskset``): the processes inherit it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "startup.json"
SENTENCE = "A man is riding a bike."
# printed by each timed process at exit: whether PyTorch was imported
PROBE = ("import atexit, sys; atexit.register(lambda: sys.stderr.write("
         "'\\nTORCH %s\\n' % ('torch' in sys.modules)))\n")


def commands(model: Path | None) -> dict[str, list[str]]:
    ours = [sys.executable, "-c", PROBE + "import runpy; sys.argv[0] = 'transformer'; "
            "runpy.run_module('transformer', run_name='__main__')"]
    out = {"import torch": [sys.executable, "-c", PROBE + "import torch"],
           "transformer --help": [*ours, "--help"],
           "transformer translate --help": [*ours, "translate", "--help"],
           "transformer version": [*ours, "version"]}
    if model is not None:
        one = [*ours, "translate", "--model", str(model), "--threads", "1", SENTENCE]
        out["translate 1 line (auto)"] = one
        out["translate 1 line (ctranslate2)"] = [*one, "--engine", "ctranslate2"]
    return out


def child_env() -> dict[str, str]:
    """The timed processes' environment: one OpenMP thread, and bytecode written (the warm-up
    run writes it, as a user's first run does; PYTHONDONTWRITEBYTECODE would have every timed
    start compile our modules from source)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run(command: list[str]) -> tuple[float, bool]:
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=child_env())
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[-4:])} failed:\n{done.stderr[-2000:]}")
    return seconds, "TORCH True" in done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None,
                        help="a translation model directory for the one-sentence commands")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from machine import describe

    todo = commands(args.model)
    for command in todo.values():  # warm: bytecode written, the run converted, the CPU cached
        run(command)
    times: dict[str, list[float]] = {name: [] for name in todo}
    torch_loaded: dict[str, bool] = {}
    for _ in range(args.repeats):
        for name, command in todo.items():
            seconds, loaded = run(command)
            times[name].append(seconds)
            torch_loaded[name] = loaded
    rows = [{"command": name, "min_s": round(min(t), 3), "median_s": round(statistics.median(t), 3),
             "max_s": round(max(t), 3), "imports_torch": torch_loaded[name]} for name, t in times.items()]
    print(f"{'command':34} {'min s':>7} {'median s':>9} {'max s':>7}  torch")
    for row in rows:
        print(f"{row['command']:34} {row['min_s']:7.3f} {row['median_s']:9.3f} {row['max_s']:7.3f}  "
              f"{'yes' if row['imports_torch'] else 'no'}")
    result = {"benchmark": "startup", "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "model": str(args.model) if args.model else None, "repeats": args.repeats,
              "affinity": sorted(os.sched_getaffinity(0)), "rows": rows, "machine": describe()}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
