"""The weights a run keeps of its last evaluations, ``RUN_DIR/snapshots/step-NNNNNNN.safetensors``
(``train --average-last N``): where they are and which there are. Training writes them
(:mod:`transformer.training.checkpoint`); averaging and snapshot ensembles read them."""

from __future__ import annotations

from pathlib import Path

SNAPSHOT_DIR = "snapshots"


def snapshot_path(run_dir: Path | str, step: int) -> Path:
    """Where the snapshot of update ``step`` of the run in ``run_dir`` lives."""
    return Path(run_dir) / SNAPSHOT_DIR / f"step-{step:07d}.safetensors"


def list_snapshots(run_dir: Path | str) -> list[tuple[int, Path]]:
    """``(step, path)`` of every snapshot in ``RUN_DIR/snapshots/``, oldest first."""
    found = []
    folder = Path(run_dir) / SNAPSHOT_DIR
    for path in folder.glob("step-*.safetensors") if folder.is_dir() else ():
        digits = path.name[len("step-"):-len(".safetensors")]
        if digits.isdigit():
            found.append((int(digits), path))
    return sorted(found)
