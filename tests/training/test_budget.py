"""The budget's arithmetic: the share used is the largest of its parts, the stop reason the first
bound reached, and the eta and planned updates follow the pace so far."""

from __future__ import annotations

import pytest

from transformer.training.budget import budget_used, eta_s, planned_updates, stop_reason
from transformer.training.loop_state import LoopConfig, TrainState


def test_the_share_used_is_the_largest_of_updates_epochs_and_minutes():
    config = LoopConfig(max_steps=100, epochs=4, minutes=10.0)
    state = TrainState(step=20, epoch=1, batch_index=5)  # 1.5 of 4 epochs with 10 batches each
    assert budget_used(config, state, elapsed=60.0, batches_per_epoch=10, reserve=0.0) == 0.375
    assert budget_used(config, state, elapsed=300.0, batches_per_epoch=10, reserve=0.0) == 0.5
    # the reserve for the final evaluations shortens the time budget
    assert budget_used(config, state, elapsed=300.0, batches_per_epoch=10, reserve=300.0) == 1.0


def test_the_stop_reason_is_the_bound_reached():
    config = LoopConfig(max_steps=10, minutes=1.0, patience=2)
    assert stop_reason(config, TrainState(step=9), elapsed=0.0, reserve=0.0) is None
    assert stop_reason(config, TrainState(step=10), elapsed=0.0, reserve=0.0) == "max_steps"
    assert stop_reason(config, TrainState(step=3, bad_evals=2), elapsed=0.0, reserve=0.0) == "patience"
    assert stop_reason(config, TrainState(step=3), elapsed=50.0, reserve=10.0) == "minutes"


@pytest.mark.parametrize("share, eta, planned", [(0.0, None, 40), (0.25, 30.0, 40), (0.5, 10.0, 20)])
def test_eta_and_planned_updates_follow_the_pace_so_far(share, eta, planned):
    """10 updates in 10 seconds; with nothing used yet the plan is max_steps."""
    assert eta_s(share=share, elapsed=10.0) == eta
    assert planned_updates(share=share, step=10, max_steps=40) == planned
