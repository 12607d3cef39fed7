"""Which model a run keeps: the best by the task's metric over its evaluations, and when
evaluations without improvement stop it early (``patience``).

A task whose evaluation lacks its metric (a translation run without a BLEU sample) is selected by
validation loss; a run without validation data keeps its last model.
"""

from __future__ import annotations

from typing import Any

from transformer.training.loop_state import TrainState


def record_evaluation(state: TrainState, result: dict[str, Any] | None, *, metric: str,
                      higher_is_better: bool) -> bool:
    """Count an evaluation made at update ``state.step`` into ``state`` (best metric and update,
    evaluations without improvement, the latest figures); ``result`` is the task's figures, or None
    without validation data. Returns whether this update's model is the one to keep."""
    if result is None:  # no validation data: the last model is the one to keep
        state.best_step = state.step
        return True
    if metric not in result:  # e.g. no BLEU sample: select by validation loss
        metric, higher_is_better = "loss", False
    value = float(result[metric])
    better = state.best_metric is None or (
        value > state.best_metric if higher_is_better else value < state.best_metric
    )
    if better:
        state.best_metric, state.best_step, state.bad_evals = value, state.step, 0
    else:
        state.bad_evals += 1
    state.last_eval = {k: float(v) for k, v in result.items()}
    return better
