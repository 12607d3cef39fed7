"""apply_overrides: dotted keys into the nested model, validation, unknown keys named."""

from __future__ import annotations

import pytest

from transformer.config import ModelConfig, apply_overrides, classifier_config, translation_config


def test_dotted_keys_reach_the_nested_model_and_plain_keys_the_run():
    config = translation_config("tiny")
    changed = apply_overrides(config, {"model.d_model": 64, "lr": 0.01})
    assert changed.model == config.model.replace(d_model=64) and changed.lr == 0.01
    assert config.model.d_model == 32  # the original is untouched (frozen)


def test_layers_sets_every_stack_the_model_has_and_explicit_stacks_win():
    model = ModelConfig.tiny(vocab_size=100)
    assert apply_overrides(model, {"layers": 3}).num_decoder_layers == 3
    both = apply_overrides(model, {"layers": 3, "num_decoder_layers": 1})
    assert (both.num_encoder_layers, both.num_decoder_layers) == (3, 1)
    classifier = apply_overrides(classifier_config("tiny"), {"model.layers": 4}).model
    assert (classifier.num_encoder_layers, classifier.num_decoder_layers) == (4, 0)


def test_unknown_keys_and_bad_values_raise_naming_them():
    config = translation_config("tiny")
    with pytest.raises(ValueError, match="speed"):
        apply_overrides(config, {"speed": 2})
    with pytest.raises(ValueError, match="d_modl"):
        apply_overrides(config, {"model.d_modl": 2})
    with pytest.raises(ValueError, match="divisible"):
        apply_overrides(config, {"model.d_model": 30})
