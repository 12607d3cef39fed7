"""Run a command and measure it (benchmarks/data_scale.py): wall time, the largest process's peak
RSS, the peak RSS and PSS of its whole process tree sampled every 0.1 s, and the seconds until a
training run's first update appears in its metrics.jsonl. Linux only (/proc, /usr/bin/time)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # the task ended meanwhile
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo += _children(p)
    return pids


def kib(path: str, key: str) -> int:
    """The KiB figure of the line starting with ``key`` in a /proc file (0 when gone)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeMemory:
    """Samples the summed RSS and PSS of a process and its descendants until stopped."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid, self.every = pid, every
        self.rss = self.pss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def pids(self) -> list[int]:
        """The processes sampled: ``pid`` and its descendants."""
        return process_tree(self.pid)

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = self.pids()
            rss = sum(kib(f"/proc/{p}/status", "VmRSS:") for p in pids)
            pss = sum(kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids)
            self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)
            self._stop.wait(self.every)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {"tree_rss_gb": round(self.rss / 2**20, 3), "tree_pss_gb": round(self.pss / 2**20, 3)}


def run_timed(cmd: list[str], *, log: Path, env: dict | None = None,
              first_update: Path | None = None, after_step: int = 0) -> dict[str, float]:
    """Run ``cmd`` under /usr/bin/time -v (output to ``log``): its wall time, the largest
    process's peak RSS (time's "maximum resident set size"), the process tree's sampled peaks and,
    with ``first_update`` (a metrics.jsonl), the seconds until a training record past
    ``after_step`` appears there."""
    began = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(["/usr/bin/time", "-v", *cmd], env={**os.environ, **(env or {})},
                                stdout=out, stderr=out)
        memory = TreeMemory(proc.pid)
        seen = None
        while proc.poll() is None:
            if first_update is not None and seen is None and _has_update(first_update, after_step):
                seen = time.perf_counter() - began
            time.sleep(0.05)
    wall = time.perf_counter() - began
    tree = memory.stop()
    text = log.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{text[-2000:]}")
    if first_update is not None and seen is None and _has_update(first_update, after_step):
        seen = wall
    result = {"wall_s": round(wall, 2), **tree}
    for line in text.splitlines():
        if "Maximum resident set size" in line:
            result["max_process_rss_gb"] = round(int(line.split()[-1]) / 2**20, 3)
    if first_update is not None:
        result["first_update_s"] = None if seen is None else round(seen, 2)
    return result


def setup_s(result: dict, metrics: Path, after: int = 0) -> float | None:
    """Seconds from the command to the start of its first update (``first_update_s`` less the
    update's own time): what reading the data and building the run cost."""
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    train = [r for r in records if r.get("kind") == "train"]
    nxt = next((i for i, r in enumerate(train) if r["step"] > after), None)
    if nxt is None or result.get("first_update_s") is None:
        return None
    took = train[nxt]["elapsed_s"] - (train[nxt - 1]["elapsed_s"] if nxt else 0.0)
    return round(result["first_update_s"] - took, 2)


def _has_update(metrics: Path, after: int) -> bool:
    try:
        lines = metrics.read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("kind") == "train" and record.get("step", 0) > after:
            return True
    return False
