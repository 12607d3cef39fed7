"""The classifier training pipeline's pieces: presets, configuration checks and positive weights
(the linear learning-rate decay is tested with the other schedules)."""

from __future__ import annotations

import math

import pytest
import torch

from transformer.training.train_classifier import (
    CLASSIFIER_PRESETS,
    ClassifierTrainConfig,
    positive_weights,
)


def test_presets_build_and_accept_overrides():
    for name, preset in CLASSIFIER_PRESETS.items():
        cfg = ClassifierTrainConfig.preset(name)
        assert preset["data"] in (None, "nsmc", "goemotions")
        model_cfg = cfg.model_config(vocab_size=cfg.vocab_size)
        assert model_cfg.num_decoder_layers == 0 and model_cfg.max_len == cfg.max_len
    assert ClassifierTrainConfig.preset("nsmc-cpu", lr=5e-4).lr == 5e-4
    with pytest.raises(ValueError, match="unknown preset"):
        ClassifierTrainConfig.preset("nope")


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        (dict(pos_weight="inverse"), "pos_weight"),
        (dict(schedule="cosine"), "schedule"),
        (dict(schedule="linear", epochs=None, max_steps=None, minutes=5.0), "linear"),
        (dict(d_model=30, num_heads=4), "divisible"),
        (dict(batch_tokens=32, max_len=64), "batch_tokens"),
        (dict(lr=0.0), "lr"),
    ],
)
def test_bad_configurations_name_the_value(changes, match):
    with pytest.raises(ValueError, match=match):
        ClassifierTrainConfig(**changes)


def test_positive_weights_are_sqrt_of_negatives_over_positives():
    labels = [[0], [0, 1], [0], [2]]  # label 0: 3 of 4, label 1: 1 of 4, label 2: 1 of 4, label 3: none
    weights = positive_weights(labels, num_labels=4, cap=10.0)
    expected = [1.0, math.sqrt(3), math.sqrt(3), 10.0]  # sqrt(1/3) is raised to 1; unseen gets the cap
    torch.testing.assert_close(weights, torch.tensor(expected, dtype=torch.float32))
