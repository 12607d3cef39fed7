"""The run configurations: they nest a ModelConfig, follow the vocabulary rule, validate their
fields and round-trip through config.json."""

from __future__ import annotations

import json

import pytest

from transformer.config import (
    PRESETS,
    ClassifierTrainConfig,
    ModelConfig,
    TranslationTrainConfig,
    classifier_config,
)


def test_translation_config_round_trips_through_json():
    cfg = TranslationTrainConfig(data="numbers", model=ModelConfig.small(vocab_size=8, d_model=32),
                                 max_steps=10, adam_betas=(0.8, 0.9))
    again = TranslationTrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    assert cfg.loop_config().max_steps == 10


def test_a_stored_config_of_the_older_layout_still_reads():
    """Before the model was nested, ``training.model`` held the preset's overrides only."""
    old = {"data": "numbers", "max_steps": 1, "preset": "tiny", "vocab_size": 60,
           "model": {"d_model": 16, "num_heads": 2}}
    cfg = TranslationTrainConfig.from_dict(old)
    assert cfg.model == ModelConfig.tiny(vocab_size=60, d_model=16, num_heads=2)


def test_the_nested_model_carries_the_requested_vocabulary():
    cfg = TranslationTrainConfig(data="numbers", max_steps=1, vocab_size=300)
    assert cfg.model.src_vocab_size == cfg.model.tgt_vocab_size == 300
    built = cfg.model_config(src_vocab_size=290, tgt_vocab_size=280)  # the tokenizers' real sizes
    assert (built.src_vocab_size, built.tgt_vocab_size) == (290, 280)
    assert built.replace(src_vocab_size=300, tgt_vocab_size=300) == cfg.model


@pytest.mark.parametrize("kwargs", [
    {"data": None},  # neither a corpus nor files
    {"data": "wmt14"},
    {"valid_src": "a.en"},  # without valid_tgt
    {"schedule": "cosine"},
    {"max_steps": None},  # no stop condition at all
    {"metric": "rouge"},
    {"on_long": "wrap"},
    {"model_type": "wordpiece"},
    {"model": {"d_model": 32}},  # the model is a ModelConfig, not a dict
])
def test_bad_translation_configurations(kwargs):
    with pytest.raises(ValueError):
        TranslationTrainConfig(**{"data": "numbers", "max_steps": 5, **kwargs})


def test_unknown_fields_in_a_stored_config():
    with pytest.raises(ValueError, match="unknown training fields"):
        TranslationTrainConfig.from_dict({"data": "numbers", "max_steps": 1, "speed": "fast"})


def test_classifier_presets_build_and_accept_overrides():
    for name, preset in PRESETS["classification"].items():
        cfg = classifier_config(name)
        assert preset.data in (None, "nsmc", "goemotions")
        model_cfg = cfg.model_config(src_vocab_size=cfg.vocab_size)
        assert model_cfg.num_decoder_layers == 0 and model_cfg == cfg.model
    assert classifier_config("nsmc-cpu", {"lr": 5e-4}).lr == 5e-4
    with pytest.raises(ValueError, match="unknown preset"):
        classifier_config("nope")


def test_classifier_config_round_trips_through_json():
    cfg = classifier_config("tiny", {"model.d_model": 64})
    assert ClassifierTrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"pos_weight": "inverse"}, "pos_weight"),
        ({"schedule": "cosine"}, "schedule"),
        ({"schedule": "linear", "epochs": None, "max_steps": None, "minutes": 5.0}, "linear"),
        ({"model.d_model": 30, "model.num_heads": 4}, "divisible"),
        ({"batch_tokens": 32, "model.max_len": 64}, "batch_tokens"),
        ({"lr": 0.0}, "lr"),
        ({"model.num_decoder_layers": 2}, "no decoder"),
    ],
)
def test_bad_classifier_configurations_name_the_value(changes, match):
    with pytest.raises(ValueError, match=match):
        classifier_config(None, changes)
