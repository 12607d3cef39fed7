"""Which evaluation's model is kept: the best by the task's metric (by loss when the metric is
missing), the last without validation data; evaluations without improvement are counted."""

from __future__ import annotations

from transformer.training.loop_state import TrainState
from transformer.training.model_selection import record_evaluation


def test_the_best_by_a_higher_is_better_metric_is_kept_and_worse_ones_counted():
    state = TrainState(step=2)
    assert record_evaluation(state, {"bleu": 10.0, "loss": 3.0}, metric="bleu", higher_is_better=True)
    state.step = 4
    assert not record_evaluation(state, {"bleu": 9.0, "loss": 2.0}, metric="bleu",
                                 higher_is_better=True)
    assert (state.best_metric, state.best_step, state.bad_evals) == (10.0, 2, 1)
    assert state.last_eval == {"bleu": 9.0, "loss": 2.0}
    state.step = 6
    assert record_evaluation(state, {"bleu": 11.0}, metric="bleu", higher_is_better=True)
    assert (state.best_metric, state.best_step, state.bad_evals) == (11.0, 6, 0)


def test_without_the_metric_the_loss_selects():
    state = TrainState(step=1)
    assert record_evaluation(state, {"loss": 3.0}, metric="bleu", higher_is_better=True)
    state.step = 2
    assert record_evaluation(state, {"loss": 2.5}, metric="bleu", higher_is_better=True)
    assert (state.best_metric, state.best_step) == (2.5, 2)


def test_without_validation_data_the_last_model_is_kept():
    state = TrainState(step=7)
    assert record_evaluation(state, None, metric="accuracy", higher_is_better=True)
    assert state.best_step == 7 and state.best_metric is None and state.last_eval == {}
