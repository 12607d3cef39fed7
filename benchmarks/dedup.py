"""The dedup filter of `transformer prepare`: memory and time of its set of pair hashes, the
project's sorted runs (transformer.data.seen_hashes) against a Python set of ints.

Random 64-bit hashes in batches of prepare's chunk (4,096 pairs), 1% of them repeats; for each
size, each structure in a fresh child process: the memory it holds at the end (tracemalloc, which
counts NumPy's arrays and Python's ints alike), its peak, and the seconds spent adding.

    taskset -c 1 .venv/bin/python benchmarks/dedup.py --sizes 1000000 4500000 40000000

Prints a table and writes benchmarks/results/dedup.json (with the machine).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from machine import describe  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
BATCH = 4096

CHILD = """
import sys, time, tracemalloc
import numpy as np
from transformer.data.seen_hashes import SeenHashes

kind, size, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
tracemalloc.start()
seen = SeenHashes() if kind == "runs" else set()
spent = dropped = 0
for start in range(0, size, batch):
    n = min(batch, size - start)
    hashes = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    hashes[: n // 100] = hashes[n // 2 : n // 2 + n // 100]  # 1% repeats
    began = time.perf_counter()
    if kind == "runs":
        fresh = seen.add(hashes)
    else:
        fresh = np.ones(n, dtype=bool)
        for j, h in enumerate(hashes.tolist()):
            if h in seen:
                fresh[j] = False
            else:
                seen.add(h)
    spent += time.perf_counter() - began
    dropped += int((~fresh).sum())
    del hashes, fresh
held, peak = tracemalloc.get_traced_memory()
print(len(seen), dropped, held, peak, spent)
"""


def measure(kind: str, size: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(size), str(BATCH)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    members, dropped, held, peak, spent = out.stdout.split()
    return {"structure": kind, "pairs": size, "members": int(members), "dropped": int(dropped),
            "held_bytes": int(held), "peak_bytes": int(peak), "add_s": round(float(spent), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 4_500_000])
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks/results/dedup.json")
    args = parser.parse_args()
    rows = []
    print("| pairs | structure | held | bytes a member | peak | add s |")
    print("|---:|---|---:|---:|---:|---:|")
    for size in args.sizes:
        for kind in ("set", "runs"):
            row = measure(kind, size)
            rows.append(row)
            print(f"| {size:,} | {'Python set' if kind == 'set' else 'sorted runs'} | "
                  f"{row['held_bytes'] / 2**20:,.0f} MiB | {row['held_bytes'] / row['members']:.1f} | "
                  f"{row['peak_bytes'] / 2**20:,.0f} MiB | {row['add_s']:.1f} |", flush=True)
        same = rows[-1]["members"] == rows[-2]["members"] and rows[-1]["dropped"] == rows[-2]["dropped"]
        if not same:
            sys.exit(f"the two structures disagree at {size} pairs: {rows[-2:]}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"benchmark": "dedup", "machine": describe(),
                                       "command": " ".join([Path(sys.executable).name, *sys.argv]),
                                       "batch": BATCH, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
