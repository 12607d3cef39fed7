"""The classifier training pipeline's pieces: positive weights and the linear learning-rate decay
(its configuration and presets: tests/config/)."""

from __future__ import annotations

import math

import pytest
import torch

from transformer.training.train_classifier import LinearDecay, positive_weights


def test_positive_weights_are_sqrt_of_negatives_over_positives():
    labels = [[0], [0, 1], [0], [2]]  # label 0: 3 of 4, label 1: 1 of 4, label 2: 1 of 4, label 3: none
    weights = positive_weights(labels, num_labels=4, cap=10.0)
    expected = [1.0, math.sqrt(3), math.sqrt(3), 10.0]  # sqrt(1/3) is raised to 1; unseen gets the cap
    torch.testing.assert_close(weights, torch.tensor(expected, dtype=torch.float32))


def test_linear_decay_warms_up_then_reaches_zero_at_the_last_update():
    rate = LinearDecay(peak_lr=1e-3, warmup=10, total=110)
    assert rate(0) == pytest.approx(1e-4)  # update 1
    assert rate(9) == pytest.approx(1e-3)  # update 10: the peak
    assert rate(59) == pytest.approx(0.5e-3)  # update 60: halfway down
    assert rate(109) == 0.0 and rate(500) == 0.0
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=rate)
    state = sched.state_dict()
    assert state["lr_lambdas"][0] == {"peak_lr": 1e-3, "warmup": 10, "total": 110}
