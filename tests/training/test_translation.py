"""The translation pipeline's pieces: its configuration (its per-epoch batches: tests/data/test_epochs.py)."""

from __future__ import annotations

import json

import pytest

from transformer.training.translation import TranslationTrainConfig


def test_config_round_trips_through_json():
    cfg = TranslationTrainConfig(data="numbers", model={"d_model": 32}, max_steps=10,
                                 adam_betas=(0.8, 0.9))
    again = TranslationTrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    assert cfg.loop_config().max_steps == 10


@pytest.mark.parametrize("kwargs", [
    {"data": None},  # neither a corpus nor files
    {"data": "wmt14"},
    {"valid_src": "a.en"},  # without valid_tgt
    {"schedule": "cosine"},
    {"max_steps": None},  # no stop condition at all
    {"metric": "rouge"},
    {"on_long": "wrap"},
    {"model_type": "wordpiece"},
])
def test_bad_configurations(kwargs):
    with pytest.raises(ValueError):
        TranslationTrainConfig(**{"data": "numbers", "max_steps": 5, **kwargs})


def test_unknown_fields_in_a_stored_config():
    with pytest.raises(ValueError, match="unknown training fields"):
        TranslationTrainConfig.from_dict({"data": "numbers", "max_steps": 1, "speed": "fast"})
