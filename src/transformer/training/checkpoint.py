"""The training state on disk: the checkpoint and the snapshots, written atomically and read
without unpickling.

    RUN_DIR/
      checkpoint/         last training state: model.safetensors + state.pt
      snapshots/          step-NNNNNNN.safetensors: weights at the last evaluations (averaging)

``state.pt`` holds only tensors and plain Python values and is read with
``torch.load(..., weights_only=True)``. What the Trainer puts in ``state.pt`` and how it comes back
is :mod:`~transformer.training.exact_resume`; the model directory itself (``config.json``,
``model.safetensors``, ``tokenizer/``) is :mod:`transformer.model_dir`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_model
from torch import nn

from transformer.atomic import existing_dir, replace_dir
from transformer.errors import InputError, first_line
from transformer.model_dir import FORMAT_VERSION, WEIGHTS_FILE, load_weights, save_weights, unwrap
from transformer.model_dir.snapshots import SNAPSHOT_DIR, list_snapshots, snapshot_path  # noqa: F401 - read here too

CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.pt"


# --- snapshots: the weights at recent evaluations, for checkpoint averaging -----------------------


def save_snapshot(run_dir: Path | str, model: nn.Module, *, step: int, keep: int) -> None:
    """Write the weights of update ``step`` and delete all but the newest ``keep`` snapshots."""
    path = snapshot_path(run_dir, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_weights(unwrap(model), path)
    for _, old in list_snapshots(run_dir)[:-keep]:
        old.unlink(missing_ok=True)


def drop_snapshots_after(run_dir: Path | str, step: int) -> None:
    """Delete snapshots newer than ``step`` (a resumed run redoes those updates)."""
    for saved, path in list_snapshots(run_dir):
        if saved > step:
            path.unlink(missing_ok=True)


# --- the training checkpoint ---------------------------------------------------------------------


def save_checkpoint(run_dir: Path | str, *, model: nn.Module, state: dict[str, Any]) -> None:
    """Write ``RUN_DIR/checkpoint/`` (weights + ``state``) by swapping in a complete new directory.

    ``state`` must hold only tensors and plain Python values (optimizer and scheduler state dicts,
    counters, RNG states) so that it loads with ``weights_only=True``.
    """
    model = unwrap(model)

    def fill(tmp: Path) -> None:
        save_model(model, str(tmp / WEIGHTS_FILE))
        torch.save({"format_version": FORMAT_VERSION, **state}, tmp / STATE_FILE)

    replace_dir(Path(run_dir) / CHECKPOINT_DIR, fill)


def has_checkpoint(run_dir: Path | str) -> bool:
    return existing_dir(Path(run_dir) / CHECKPOINT_DIR) is not None


def load_checkpoint(
    run_dir: Path | str, *, model: nn.Module, map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Load ``RUN_DIR/checkpoint/``'s weights into ``model`` and return its state dict.

    InputError (one line) when the checkpoint is missing, corrupt, or from another configuration.
    """
    path = existing_dir(Path(run_dir) / CHECKPOINT_DIR)
    if path is None:
        raise InputError(f"{Path(run_dir) / CHECKPOINT_DIR}: no checkpoint to resume from")
    load_weights(unwrap(model), path / WEIGHTS_FILE)
    state_path = path / STATE_FILE
    if not state_path.is_file():
        raise InputError(f"{state_path}: missing training state")
    try:
        state = torch.load(state_path, map_location=map_location, weights_only=True)
    except Exception as err:
        raise InputError(f"{state_path}: unreadable training state ({first_line(err)})") from None
    if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
        raise InputError(f"{state_path}: not a training state of format {FORMAT_VERSION}")
    return state
