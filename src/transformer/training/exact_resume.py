"""Exact resume: what a :class:`~transformer.training.trainer.Trainer` saves in its checkpoint and
how it comes back, so that a resumed run makes the updates an uninterrupted one would have made.

Saved: weights, optimizer, scheduler, grad scaler, the loop's counters and data position
(:class:`~transformer.training.loop_state.TrainState`), the RNG states of every rank and what
their arithmetic depends on (:mod:`~transformer.training.reproducibility`: the thread count, set
back on resume, and the machine kind). Rank 0 writes; when its write fails (a full disk), every
rank raises the same one-line :class:`~transformer.errors.WriteError` and the previous checkpoint
is left as it was.

A resume may be given another budget than the run had (``train --resume RUN --max-steps 8``): the
checkpoint records the budget it was written under, and when it differs the schedule follows the
new one from the next update on (:func:`follow_budget`); with the same budget nothing changes and
the resume is exact. The files themselves (``RUN_DIR/checkpoint/``, ``RUN_DIR/snapshots/``) are
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
from transformer.training.loop_state import LoopConfig, TrainState
from transformer.training.reproducibility import arithmetic, restore_arithmetic
from transformer.training.rng import rng_state, seed_everything, set_rng_state
from transformer.training.schedule import (
    LRSchedule,
    keep_settings,
    rates_of,
    rerate,
    set_progress,
    settings_of,
)

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
            "budget": budget_of(trainer.config),
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
    settings = settings_of(trainer.scheduler)  # this run's, before the checkpoint's replace them
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
    follow_budget(trainer, settings=settings, saved_budget=saved.get("budget"))
    if dist.is_main:
        trainer.metrics.truncate(trainer.state.step)
        drop_snapshots_after(trainer.run_dir, trainer.state.step)
        log.info("resumed %s at update %d (epoch %d, batch %d), %d CPU thread%s", trainer.run_dir,
                 trainer.state.step, trainer.state.epoch, trainer.state.batch_index,
                 torch.get_num_threads(), "" if torch.get_num_threads() == 1 else "s")


def budget_of(config: LoopConfig) -> dict[str, Any]:
    """The budget of a run's loop settings: updates, epochs and minutes (None: not bounded by it)."""
    return {"max_steps": config.max_steps, "epochs": config.epochs, "minutes": config.minutes}


def follow_budget(trainer: Any, *, settings: list[LRSchedule],
                  saved_budget: dict[str, Any] | None) -> None:
    """After a checkpoint was loaded into ``trainer``: when the run now has another budget than
    ``saved_budget`` (the checkpoint's; None in one written before it was recorded) or other
    schedule ``settings`` than the checkpoint's (``total`` follows ``max_steps``), keep this run's
    settings and set the rate of the next update by them and by the share of the new budget
    used so far. The checkpoint's optimizer holds the rate its own budget gave that update."""
    scheduler = trainer.scheduler
    if not rates_of(scheduler):  # no schedule of this package's: nothing follows a budget
        return
    budget = budget_of(trainer.config)
    changed = keep_settings(scheduler, settings)
    if not changed and saved_budget in (None, budget):
        return
    _, n = trainer.epoch_plan(trainer.state.epoch)
    share = trainer.budget_used(trainer.state.elapsed_s, n)
    set_progress(scheduler, D.broadcast_float(share, device=trainer.device))  # rank 0's clock
    rerate(scheduler)
    if trainer.dist.is_main:
        changes = [f"{key} {saved_budget.get(key)} -> {value}" for key, value in budget.items()
                   if saved_budget is not None and saved_budget.get(key) != value]
        log.info("resumed with another budget (%s): the schedule follows it from update %d",
                 ", ".join(changes) or "other schedule settings", trainer.state.step + 1)
