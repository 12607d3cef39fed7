"""The classifier run's inputs: positive weights (the classifier's configuration and presets:
tests/config/; the linear learning-rate decay is tested with the other schedules)."""

from __future__ import annotations

import math

import torch

from transformer.training.classifier_inputs import positive_weights


def test_positive_weights_are_sqrt_of_negatives_over_positives():
    labels = [[0], [0, 1], [0], [2]]  # label 0: 3 of 4, label 1: 1 of 4, label 2: 1 of 4, label 3: none
    weights = positive_weights(labels, num_labels=4, cap=10.0)
    expected = [1.0, math.sqrt(3), math.sqrt(3), 10.0]  # sqrt(1/3) is raised to 1; unseen gets the cap
    torch.testing.assert_close(weights, torch.tensor(expected, dtype=torch.float32))
