"""A run's configuration in a JSON file (``--config``): what ``config show`` prints reads back to
the same configuration; an unknown key or a value of the wrong type is refused in one line naming
the file and the key; overrides change single fields, and naming training data replaces the
file's."""

from __future__ import annotations

import json
import re

import pytest

from transformer.config import classifier_config, translation_config
from transformer.config.files import read_run_config, run_config_from_file
from transformer.errors import InputError


def write(path, data) -> str:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


@pytest.mark.parametrize("task, config", [
    ("translation", translation_config("multi30k-cpu", {"model.d_model": 256, "seed": 3})),
    ("translation", translation_config("tiny", {"train_src": "a.en", "train_tgt": "a.de",
                                                "adam_betas": (0.8, 0.9), "clip_norm": 0})),
    ("classification", classifier_config("goemotions-cpu", {"lr": 1e-4})),
    ("classification", classifier_config(None, {"tensorboard": True, "metric": "micro_f1"})),
])
def test_what_config_show_prints_reads_back_to_the_same_configuration(tmp_path, task, config):
    path = write(tmp_path / "c.json", {"task": task, "training": config.to_dict()})
    assert read_run_config(path, task=task) == config


def test_a_model_section_may_hold_some_fields_of_the_preset_it_names(tmp_path):
    path = write(tmp_path / "c.json", {"training": {"preset": "base", "epochs": 1,
                                                   "model": {"d_model": 256}}})
    config = read_run_config(path, task="translation")
    assert config.model.d_model == 256 and config.model.num_heads == 8  # base's


@pytest.mark.parametrize("training, words", [
    ({"warmpu": 10}, "training.warmpu: unknown key (did you mean 'warmup'?)"),
    ({"model": {"d_modle": 64}}, "training.model.d_modle: unknown key (did you mean 'd_model'?)"),
    ({"warmup": "10"}, 'training.warmup: expected an integer, got "10"'),
    ({"warmup": 10.5}, "training.warmup: expected an integer, got 10.5"),
    ({"lr": True}, "training.lr: expected a number, got true"),
    ({"max_steps": [20]}, "training.max_steps: expected an integer or null, got [20]"),
    ({"joint": "yes"}, 'training.joint: expected true or false, got "yes"'),
    ({"adam_betas": [0.9]}, "training.adam_betas: expected a list of 2 numbers, got [0.9]"),
    ({"valid_metrics": ["bleu", 1]}, 'training.valid_metrics: expected a list of strings, got ["bleu", 1]'),
    ({"model": None}, "training.model: expected an object (the model's fields), got null"),
    ({"model": {"dropout": "0.1"}}, 'training.model.dropout: expected a number, got "0.1"'),
    ({"warmup": 0}, "warmup must be at least 1"),  # a right type, a wrong value
])
def test_a_bad_key_or_value_is_one_line_naming_the_file_and_the_key(tmp_path, training, words):
    path = write(tmp_path / "c.json", {"task": "translation", "training": training})
    with pytest.raises(InputError) as refused:
        read_run_config(path, task="translation")
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and words in message and "\n" not in message


@pytest.mark.parametrize("text, words", [
    ('{"training": {"lr": 1e-3,}}', "not JSON (line 1 column 26: Expecting property name"),
    ("lr: 1e-3\n", "not JSON (line 1 column 1"),
    ('{"training": {}, "model": {}}', "unknown key 'model'"),
    ('["training"]', 'expected an object with a "training" object'),
    ('{"task": "classification", "training": {}}', "a classification configuration"),
])
def test_a_file_that_is_not_a_configuration_is_one_line(tmp_path, text, words):
    path = write(tmp_path / "c.json", text)
    with pytest.raises(InputError, match=re.escape(words)):
        read_run_config(path, task="translation")
    with pytest.raises(InputError, match="no such configuration file"):
        read_run_config(tmp_path / "missing.json", task="translation")


def test_overrides_change_single_fields_and_keep_the_rest_of_the_file(tmp_path):
    config = translation_config("multi30k-cpu", {"warmup": 77})
    path = write(tmp_path / "c.json", {"task": "translation", "training": config.to_dict()})
    changed = run_config_from_file(path, task="translation",
                                   overrides={"max_steps": 20, "model.dropout": 0.3})
    assert changed == config.replace(max_steps=20, model=config.model.replace(dropout=0.3))
    assert changed.minutes == 60 and changed.warmup == 77  # the file's, not a preset's
    with pytest.raises(ValueError, match="unknown TranslationTrainConfig field: colour"):
        run_config_from_file(path, task="translation", overrides={"colour": 1})


def test_training_data_given_as_overrides_replace_the_files(tmp_path):
    config = translation_config("tiny", {"valid_src": "v.en", "valid_tgt": "v.de"})
    assert config.data == "multi30k"
    path = write(tmp_path / "c.json", {"training": config.to_dict()})
    files = run_config_from_file(path, task="translation",
                                 overrides={"train_src": "a.en", "train_tgt": "a.de"})
    assert (files.data, files.train_src, files.valid_src) == (None, "a.en", None)
    prepared = run_config_from_file(path, task="translation", overrides={"data_dir": "d"})
    assert (prepared.data, prepared.data_dir) == (None, "d")
    same = run_config_from_file(path, task="translation", overrides={"src_lang": "fr"})
    assert (same.data, same.valid_src) == ("multi30k", "v.en")
