"""Parameter averaging (checkpoint averaging, section 6.1 of the paper).

The paper averages the last checkpoints of a run: :func:`average_snapshots` does that with the
weights a run keeps of its last evaluations (``RUN_DIR/snapshots/``, ``keep_last`` in training).
:func:`average_model_dirs` averages any model directories of the same configuration and tokenizers
(e.g. runs from different seeds). Every floating-point parameter and buffer becomes the mean over
the inputs; the result is written as a new model directory.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from transformer.errors import InputError
from transformer.model_dir import (
    CONFIG_FILE,
    RunRecord,
    load_model_dir,
    load_weights,
    save_model_dir,
)
from transformer.model_dir.output import check_model_out
from transformer.training.checkpoint import SNAPSHOT_DIR, list_snapshots

log = logging.getLogger(__name__)



def _meaning(record: RunRecord) -> dict[str, Any]:
    """What must agree between two model directories for their weights to mean the same thing:
    the task, the model's shape and the classifier's head."""
    head = record.classifier.to_dict() if record.classifier is not None else None
    return {"task": record.task, "model": record.model.to_dict(), "classifier": head}


def _first_difference(a: Any, b: Any, prefix: str = "") -> str:
    """A short description of where two JSON values differ (``model.d_model: 256 vs 512``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{prefix}{key}.")
    return f"{prefix.rstrip('.')}: {a!r} vs {b!r}"


def average_model_dirs(run_dirs: Sequence[Path | str], out_dir: Path | str, *,
                       overwrite: bool = False) -> dict[str, Any]:
    """Average the weights of ``run_dirs`` (at least two) into the model directory ``out_dir``.

    Raises InputError when a directory is missing or corrupt, when the configurations (task,
    model shape, classifier head) or the tokenizers differ, or, before anything is read, when
    ``out_dir`` holds something and ``overwrite`` is not set
    (:func:`transformer.model_dir.output.check_model_out`). Returns a summary dict (``out``,
    ``averaged_from``, ``tensors``, ``parameters``).
    """
    check_model_out(out_dir, overwrite=overwrite)
    dirs = [Path(d) for d in run_dirs]
    if len(dirs) < 2:
        raise InputError(f"averaging needs at least two model directories, got {len(dirs)}")
    first = load_model_dir(dirs[0])
    model = first.model
    total: dict[str, torch.Tensor] = {}
    _accumulate(total, model)
    for run_dir in dirs[1:]:
        other = load_model_dir(run_dir)
        if _meaning(first.record) != _meaning(other.record):
            raise InputError(f"{run_dir / CONFIG_FILE} does not match {dirs[0] / CONFIG_FILE}: "
                             f"{_first_difference(_meaning(first.record), _meaning(other.record))}")
        if (other.src_tokenizer != first.src_tokenizer
                or other.tgt_tokenizer != first.tgt_tokenizer):
            raise InputError(f"{run_dir}: its tokenizers differ from those of {dirs[0]}")
        _accumulate(total, other.model)
        del other
    _assign_mean(model, total, len(dirs))
    config = {k: v for k, v in first.record.to_dict().items() if k not in ("best_validation", "model")}
    config["averaged_from"] = [str(d) for d in dirs]
    save_model_dir(out_dir, model, config=config, src_tokenizer=first.src_tokenizer,
                   tgt_tokenizer=first.tgt_tokenizer)
    log.info("averaged %d model directories into %s", len(dirs), out_dir)
    return {"out": str(out_dir), "averaged_from": [str(d) for d in dirs],
            "tensors": len(total), "parameters": sum(t.numel() for t in total.values())}


def _averaged_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Floating-point parameters and persistent buffers, each once (tied tensors share a name)."""
    out = dict(model.named_parameters())
    for name, buf in model.named_buffers():
        if buf.is_floating_point():
            out[name] = buf
    return {name: t for name, t in out.items() if t.is_floating_point()}


def average_weights(model: torch.nn.Module, paths: Sequence[Path]) -> torch.nn.Module:
    """Set ``model``'s weights to the mean of the safetensors files ``paths`` (loaded in turn)."""
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        load_weights(model, path)
        _accumulate(total, model)
    _assign_mean(model, total, len(paths))
    return model


def _accumulate(total: dict[str, torch.Tensor], model: torch.nn.Module) -> None:
    """Add ``model``'s averaged tensors to the float64 sums in ``total`` (started when empty)."""
    for name, tensor in _averaged_tensors(model).items():
        value = tensor.detach().to(torch.float64)
        if name in total:
            total[name] += value
        else:
            total[name] = value.clone()


def _assign_mean(model: torch.nn.Module, total: dict[str, torch.Tensor], count: int) -> None:
    """Set ``model``'s averaged tensors to ``total / count``."""
    with torch.no_grad():
        for name, tensor in _averaged_tensors(model).items():
            tensor.copy_(total[name] / count)


def average_snapshots(run_dir: Path | str, out_dir: Path | str, *, last: int,
                      overwrite: bool = False) -> dict[str, Any]:
    """Average the newest ``last`` snapshots of the run in ``run_dir`` into the model directory
    ``out_dir`` (which may be ``run_dir`` itself, with ``overwrite``); returns a summary dict
    (``out``, ``averaged_from``, ``steps``). InputError when the run keeps fewer snapshots than
    that, or, before anything is read, when ``out_dir`` holds something and ``overwrite`` is not
    set (:func:`transformer.model_dir.output.check_model_out`)."""
    check_model_out(out_dir, overwrite=overwrite)
    run_dir = Path(run_dir)
    if last < 2:
        raise InputError(f"averaging needs at least two snapshots, got --last {last}")
    snapshots = list_snapshots(run_dir)
    if len(snapshots) < last:
        raise InputError(
            f"{run_dir / SNAPSHOT_DIR}: {len(snapshots)} snapshot(s), fewer than --last {last} "
            "(train with --average-last N to keep the weights of the last N evaluations)"
        )
    chosen = snapshots[-last:]
    loaded = load_model_dir(run_dir)
    average_weights(loaded.model, [path for _, path in chosen])
    config = {k: v for k, v in loaded.record.to_dict().items()
              if k not in ("best_validation", "model")}
    config["averaged_from"] = [str(path) for _, path in chosen]
    save_model_dir(out_dir, loaded.model, config=config, src_tokenizer=loaded.src_tokenizer,
                   tgt_tokenizer=loaded.tgt_tokenizer)
    log.info("averaged the last %d snapshots of %s into %s", last, run_dir, out_dir)
    return {"out": str(out_dir), "averaged_from": config["averaged_from"],
            "steps": [step for step, _ in chosen]}
