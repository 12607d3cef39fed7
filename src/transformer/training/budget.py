"""A run's budget: updates (``max_steps``), epochs or wall-clock ``minutes``, whichever ends first.

The :class:`~transformer.training.trainer.Trainer` asks these pure functions of its settings
(:class:`~transformer.config.loop.LoopConfig`) and counters
(:class:`~transformer.training.loop_state.TrainState`) how much of the budget is used (which places
a schedule's cool-down), whether to stop, and how long is left. ``reserve`` is the seconds a
``minutes`` budget keeps for the evaluations that follow the stop, so they end within it too.
"""

from __future__ import annotations

from transformer.training.loop_state import LoopConfig, TrainState

STOP_REASONS = (None, "epochs", "max_steps", "minutes", "patience")


def budget_used(config: LoopConfig, state: TrainState, *, elapsed: float, batches_per_epoch: int,
                reserve: float) -> float:
    """The share of the budget used after ``elapsed`` seconds, from 0 to 1: the largest of
    updates / max_steps, epochs done / epochs and elapsed / (minutes minus ``reserve``)."""
    shares = [0.0]
    if config.max_steps is not None:
        shares.append(state.step / config.max_steps)
    if config.epochs is not None:
        shares.append((state.epoch + state.batch_index / max(batches_per_epoch, 1)) / config.epochs)
    if config.minutes is not None:
        shares.append(elapsed / max(config.minutes * 60 - reserve, 1e-9))
    return min(1.0, max(shares))


def stop_reason(config: LoopConfig, state: TrainState, *, elapsed: float,
                reserve: float) -> str | None:
    """Why the run stops now (one of :data:`STOP_REASONS`), or None to go on."""
    if config.max_steps is not None and state.step >= config.max_steps:
        return "max_steps"
    if config.epochs is not None and state.epoch >= config.epochs:
        return "epochs"
    if config.patience is not None and state.bad_evals >= config.patience:
        return "patience"
    if config.minutes is not None and elapsed + reserve >= config.minutes * 60:
        return "minutes"
    return None


def eta_s(*, share: float, elapsed: float) -> float | None:
    """Seconds left until the budget is used at the pace so far, having used ``share`` of it in
    ``elapsed`` seconds; None before any of it is used."""
    if share <= 0.0:
        return None
    return elapsed * (1.0 - share) / share


def planned_updates(*, share: float, step: int, max_steps: int | None) -> int | None:
    """The updates the run will have made when its budget is used: ``max_steps`` before any of it
    is used, else the ``step`` updates so far scaled by the ``share`` of the budget they used."""
    if share <= 0.0:
        return max_steps
    return max(step, round(step / share))
