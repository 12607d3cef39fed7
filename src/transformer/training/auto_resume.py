"""``transformer train --resume auto``: one command that starts a run or continues it.

A restarted job (``torchrun --max-restarts``, a batch scheduler's requeue, a user pressing the up
arrow) runs the same command line again. With ``resume="auto"`` that command resumes when the run
directory holds a checkpoint and starts fresh when it does not, so nothing about the command has
to change. The configuration given must be the run's own (the stored ``training`` section),
except the fields that may change on resume (budget, save interval, bad-update limit): anything
else is refused with one line naming the first field that differs, since it would silently train
another model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformer.config.runs import RESUME_FIELDS, TranslationTrainConfig
from transformer.errors import InputError
from transformer.model_dir import CONFIG_FILE, read_record
from transformer.training.checkpoint import has_checkpoint
from transformer.training.run_lock import hold_run_dir
from transformer.training.train_translation import start_unlocked, train_translation


def _plain(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples become lists)."""
    return json.loads(json.dumps(value, sort_keys=True))


def check_same_run(cfg: TranslationTrainConfig, run_dir: Path) -> None:
    """InputError naming the first field where ``cfg`` differs from the run stored in ``run_dir``
    (fields that may change on resume are not compared)."""
    path = run_dir / CONFIG_FILE
    stored = read_record(run_dir).section("training")
    if not stored:
        raise InputError(f"{path}: holds no training configuration; not a run to resume")
    given = _plain(cfg.to_dict())
    stored = _plain(stored)

    def first_difference(a: Any, b: Any, prefix: str) -> str | None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if not prefix and key in RESUME_FIELDS:
                    continue
                found = first_difference(a.get(key), b.get(key), f"{prefix}{key}.")
                if found is not None:
                    return found
            return None
        return None if a == b else f"{prefix[:-1]} (stored {b!r}, given {a!r})"

    differs = first_difference(given, stored, "")
    if differs is not None:
        raise InputError(f"{path}: the run there was trained with another configuration: "
                         f"{differs}; give the same flags, or another --out")


def check_same_origin(init_from: Path | str | None, run_dir: Path) -> None:
    """InputError when the run in ``run_dir`` started from another model than ``init_from``."""
    stored = read_record(run_dir).init_from
    path = stored.get("path") if stored is not None else None
    given = None if init_from is None else str(Path(init_from).resolve())
    if path != given:
        raise InputError(f"{run_dir / CONFIG_FILE}: the run there started from "
                         f"{path or 'random weights'}, not {given or 'random weights'}; give the "
                         "same --init-from, or another --out")


def train_or_resume_translation(cfg: TranslationTrainConfig, *, run_dir: Path | str,
                                device: str = "auto", progress: bool = False,
                                init_from: Path | str | None = None) -> dict[str, Any]:
    """Resume ``run_dir`` when it holds a checkpoint of ``cfg``'s run, else train ``cfg`` from the
    start (from ``init_from``'s weights when given; replacing a run of the same configuration
    killed before its first checkpoint); holds the run directory's lock throughout. Returns the
    training summary."""
    run_dir = Path(run_dir)
    with hold_run_dir(run_dir):
        if has_checkpoint(run_dir):
            check_same_run(cfg, run_dir)
            check_same_origin(init_from, run_dir)
            return train_translation(cfg, run_dir=run_dir, device=device, progress=progress,
                                     resume=True)
        started = (run_dir / CONFIG_FILE).exists()
        if started:
            check_same_run(cfg, run_dir)
            check_same_origin(init_from, run_dir)
        return start_unlocked(cfg, run_dir=run_dir, overwrite=started, device=device,
                              progress=progress, init_from=init_from)
