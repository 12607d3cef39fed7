"""Exact resume: what a :class:`~transformer.training.trainer.Trainer` saves in its checkpoint and
how it comes back, so that a resumed run makes the updates an uninterrupted one would have made.

Saved: weights, optimizer, scheduler, grad scaler, the loop's counters and data position
(:class:`~transformer.training.loop_state.TrainState`), the RNG states of every rank and what
their arithmetic depends on (:mod:`~transformer.training.reproducibility`: the thread count, set
back on resume, and the machine kind). Rank 0 writes; when its write fails (a full disk), every
rank raises the same one-line :class:`~transformer.errors.WriteError` and the previous checkpoint
is left as it was. The files themselves (``RUN_DIR/checkpoint/``, ``RUN_DIR/snapshots/``) are
:mod:`~transformer.training.checkpoint`.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

import torch

from transformer.errors import InputError, WriteError, first_line
from transformer.training import distributed as D
from transformer.training.checkpoint import (
    drop_snapshots_after,
    load_checkpoint,
    save_checkpoint,
    save_snapshot,
)
from transformer.training.loop_state import TrainState
from transformer.training.metrics_file import truncate_metrics
from transformer.training.reproducibility import arithmetic, restore_arithmetic
from transformer.training.rng import rng_state, seed_everything, set_rng_state

log = logging.getLogger(__name__)


def write_trainer_checkpoint(trainer: Any) -> None:
    """Write ``trainer.run_dir/checkpoint/`` (and a snapshot when it keeps them); all ranks call."""
    # every rank's generators and thread count, for an exact resume
    ranks = D.gather_to_main((rng_state(), arithmetic(trainer.device)))
    if trainer.run_dir is None:
        D.barrier()
        return
    failed: str | None = None
    if trainer.dist.is_main:
        state = {
            "trainer": asdict(trainer.state),
            "optimizer": trainer.optimizer.state_dict(),
            "scheduler": trainer.scheduler.state_dict() if trainer.scheduler is not None else None,
            "scaler": trainer.scaler.state_dict() if trainer.scaler is not None else None,
            "rng": [rng for rng, _ in ranks],
            "arithmetic": [machine for _, machine in ranks],
            "world_size": trainer.dist.world_size,
        }
        try:
            save_checkpoint(trainer.run_dir, model=trainer.model, state=state)
            if trainer.config.keep_last:
                save_snapshot(trainer.run_dir, trainer.model, step=trainer.state.step,
                              keep=trainer.config.keep_last)
        except WriteError as err:
            failed = str(err)
    failed = D.broadcast_object(failed)  # the other ranks must not wait for a write that failed
    if failed is not None:
        raise WriteError(failed)


def restore_trainer(trainer: Any) -> None:
    """Load ``trainer.run_dir/checkpoint/`` into the trainer's model, optimizer, scheduler, scaler,
    counters and RNGs; drop the metrics lines and snapshots written after it."""
    if trainer.run_dir is None:
        raise ValueError("resume needs a run_dir")
    saved = load_checkpoint(trainer.run_dir, model=trainer.model, map_location="cpu")
    where = trainer.run_dir / "checkpoint"
    try:
        trainer.optimizer.load_state_dict(saved["optimizer"])
        if trainer.scheduler is not None and saved.get("scheduler") is not None:
            trainer.scheduler.load_state_dict(saved["scheduler"])
        if trainer.scaler is not None and saved.get("scaler") is not None:
            trainer.scaler.load_state_dict(saved["scaler"])
        trainer.state = TrainState(**saved["trainer"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise InputError(f"{where}: does not fit this run ({first_line(err)})") from None
    rngs = saved.get("rng") or []
    dist = trainer.dist
    machines = saved.get("arithmetic") or []  # none in a checkpoint from before it was saved
    if len(machines) == dist.world_size:
        restore_arithmetic(machines[dist.rank], trainer.device)
    if len(rngs) == dist.world_size:
        set_rng_state(rngs[dist.rank])
    else:  # another number of processes: continue, but not bit-for-bit
        log.warning("checkpoint has %d RNG states for %d processes; reseeding",
                    len(rngs), dist.world_size)
        seed_everything(trainer.config.seed + trainer.state.step + dist.rank)
    if dist.is_main:
        truncate_metrics(trainer.run_dir, trainer.state.step)
        drop_snapshots_after(trainer.run_dir, trainer.state.step)
        log.info("resumed %s at update %d (epoch %d, batch %d), %d CPU thread%s", trainer.run_dir,
                 trainer.state.step, trainer.state.epoch, trainer.state.batch_index,
                 torch.get_num_threads(), "" if torch.get_num_threads() == 1 else "s")
