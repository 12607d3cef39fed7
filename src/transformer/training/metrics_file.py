"""``RUN_DIR/metrics.jsonl``: one JSON object per logged step and per evaluation.

Lines are appended as training goes; a resumed run first drops the lines written after its
checkpoint (it will write them again), so the file never holds a step twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformer.atomic import atomic_write_text
from transformer.errors import WriteError

METRICS_FILE = "metrics.jsonl"


def append_metrics(run_dir: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line of ``run_dir/metrics.jsonl`` (the folder is made if missing)."""
    path = run_dir / METRICS_FILE
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
    except OSError as err:
        raise WriteError(f"{path}: could not append ({err.strerror or err})") from err


def truncate_metrics(run_dir: Path, step: int) -> None:
    """Drop the lines of ``run_dir/metrics.jsonl`` written after update ``step``, and any line a
    kill cut short."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill
    atomic_write_text(path, "".join(k + "\n" for k in kept))
