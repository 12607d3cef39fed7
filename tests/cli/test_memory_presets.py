"""``memory`` estimates what the training verbs train: every preset and recipe of ``train`` and
``classify train`` (multi30k-cpu included), with ``train``'s default preset."""

from __future__ import annotations

import json

import pytest

from transformer import Transformer
from transformer.cli import build_parser, main
from transformer.cli.train import config_of
from transformer.config.presets import CLASSIFIER_PRESETS, TRANSLATION_PRESETS, classifier_config


def _estimate(capsys, *argv: str) -> dict:
    assert main(["memory", "--device", "cpu", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", list(TRANSLATION_PRESETS))
def test_every_translation_preset_and_recipe(capsys, name):
    out = _estimate(capsys, "--preset", name)
    model = config_of(build_parser().parse_args(["train", "--preset", name])).model
    assert out["parameters"] == Transformer(model).num_parameters()
    assert out["setting"]["model"] != "encoder-only"


@pytest.mark.parametrize("name", [name for name in CLASSIFIER_PRESETS
                                  if name not in TRANSLATION_PRESETS])
def test_every_classifier_preset(capsys, name):
    out = _estimate(capsys, "--preset", name)
    assert out["setting"]["model"] == "encoder-only"
    model = classifier_config(name).model
    assert out["setting"]["config"]["d_model"] == model.d_model
    assert out["setting"]["config"]["src_vocab_size"] == model.src_vocab_size


def test_the_default_preset_is_trains(capsys):
    default = _estimate(capsys)
    model = config_of(build_parser().parse_args(["train"])).model
    assert default["parameters"] == Transformer(model).num_parameters()
