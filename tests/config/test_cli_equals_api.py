"""The command line and the Python API build the same configuration, for every preset and recipe,
with and without overrides; renamed flags still parse to the same configuration."""

from __future__ import annotations

import pytest

from transformer.cli import build_parser
from transformer.cli import classify as classify_verb
from transformer.cli import demo as demo_verb
from transformer.cli import train as train_verb
from transformer.config import (
    PRESETS,
    ModelConfig,
    classifier_config,
    demo_config,
    translation_config,
)


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def train_config(*flags: str):
    return train_verb.config_of(parse("train", *flags))


def classify_config(*flags: str):
    config, _, _ = classify_verb.config_of(parse("classify", "train", "--out", "run", *flags))
    return config


TRANSLATION_FLAGS = ("--d-model", "64", "--num-heads", "2", "--layers", "2", "--decoder-layers", "1",
                     "--max-steps", "10", "--lr", "0.01", "--vocab-size", "500", "--norm-first",
                     "--save-every", "7", "--save-minutes", "2.5", "--max-bad-updates", "3")
TRANSLATION_KEYS = {"model.d_model": 64, "model.num_heads": 2, "model.layers": 2,
                    "model.num_decoder_layers": 1, "max_steps": 10, "lr": 0.01,
                    "vocab_size": 500, "model.norm_first": True, "save_every": 7,
                    "save_minutes": 2.5, "max_bad_updates": 3}


@pytest.mark.parametrize("name", list(PRESETS["translation"]))
def test_translation_presets(name):
    assert train_config("--preset", name) == translation_config(name)
    with_flags = train_config("--preset", name, *TRANSLATION_FLAGS)
    assert with_flags == translation_config(name, TRANSLATION_KEYS)
    assert (with_flags.model.num_encoder_layers, with_flags.model.num_decoder_layers) == (2, 1)
    assert with_flags.model.src_vocab_size == 500  # the requested vocabulary, until tokenizers exist
    loop = with_flags.loop_config()  # the robustness flags reach the training loop
    assert (loop.save_every, loop.save_minutes, loop.max_bad_updates) == (7, 2.5, 3)


def test_translation_without_a_preset_is_small_with_its_schedule_and_ten_epochs():
    config = train_config()
    assert config == translation_config() == translation_config("small")
    assert config.model == ModelConfig.small(vocab_size=8000)
    assert (config.schedule, config.warmup, config.epochs) == ("inverse_sqrt", 400, 10)
    assert translation_config("base").schedule == "noam"


def test_a_stop_override_replaces_the_recipe_budget_and_keeps_its_cooldown_share():
    recipe = PRESETS["translation"]["multi30k-cpu"]
    config = train_config("--preset", "multi30k-cpu", "--max-steps", "28")
    assert config == translation_config("multi30k-cpu", {"max_steps": 28})
    assert config.minutes is None and config.max_steps == 28
    assert config.cooldown_share == recipe.run["cooldown_share"] > 0 and config.cooldown == 0
    assert translation_config("multi30k-cpu").minutes == recipe.budget["minutes"]
    assert translation_config("multi30k-cpu").max_steps is None  # time is the whole budget
    assert train_config("--preset", "multi30k-cpu", "--cooldown-share", "0.5").cooldown_share == 0.5


def test_explicit_files_replace_the_corpus():
    config = train_config("--train-src", "a.en", "--train-tgt", "a.de", "--separate",
                          "--no-byte-fallback", "--adam-betas", "0.8", "0.9")
    assert config.data is None and not config.joint and not config.byte_fallback
    assert config == translation_config("small", {"train_src": "a.en", "train_tgt": "a.de",
                                                  "joint": False, "byte_fallback": False,
                                                  "adam_betas": (0.8, 0.9)})


@pytest.mark.parametrize("name", list(PRESETS["classification"]))
def test_classifier_presets(name):
    assert classify_config("--train", "t.tsv", "--preset", name) == classifier_config(name)
    flags = ("--d-model", "64", "--num-heads", "2", "--layers", "3", "--lr", "0.002",
             "--pooling", "cls", "--epochs", "1", "--save-every", "5", "--max-bad-updates", "2")
    keys = {"model.d_model": 64, "model.num_heads": 2, "model.num_encoder_layers": 3,
            "lr": 0.002, "pooling": "cls", "epochs": 1, "save_every": 5, "max_bad_updates": 2}
    config = classify_config("--train", "t.tsv", "--preset", name, *flags)
    assert config == classifier_config(name, keys)
    assert config.model.num_decoder_layers == 0  # --layers: every stack the classifier has
    assert (config.loop_config().save_every, config.loop_config().max_bad_updates) == (5, 2)


def test_classifier_corpus_brings_its_preset_and_a_preset_its_corpus():
    assert classify_config("--data", "nsmc") == classifier_config("nsmc-cpu")
    _, preset, data = classify_verb.config_of(parse("classify", "train", "--out", "r",
                                                    "--preset", "goemotions-cpu"))
    assert (preset, data) == ("goemotions-cpu", "goemotions")
    assert classify_config("--train", "t.tsv") == classifier_config(None)


def test_demo():
    assert demo_verb.config_of(parse("demo")) == demo_config()
    flags = demo_verb.config_of(parse("demo", "--max-steps", "20", "--minutes", "1", "--seed", "3"))
    assert flags == demo_config({"max_steps": 20, "minutes": 1.0, "seed": 3})
    assert (flags.max_steps, flags.minutes, flags.seed) == (20, 1.0, 3)


def test_old_spellings_parse_to_the_same_configuration():
    assert train_config("--heads", "2", "--d-model", "64") == train_config("--num-heads", "2",
                                                                           "--d-model", "64")
    assert (classify_config("--train", "t", "--heads", "2", "--d-model", "64")
            == classify_config("--train", "t", "--num-heads", "2", "--d-model", "64"))
    assert train_config("--model-type", "unigram") == train_config("--tokenizer", "unigram")
    old, new = parse("memory", "--heads", "12"), parse("memory", "--num-heads", "12")
    assert vars(old) == vars(new)


def test_model_flags_are_declared_once_with_one_meaning():
    """The model flags of train, classify train and memory are the same declaration."""
    def model_flags(*verb: str) -> dict[str, str]:
        parser = build_parser()
        sub = parser._subparsers._group_actions[0].choices  # noqa: SLF001
        p = sub[verb[0]]
        if len(verb) > 1:
            p = p._subparsers._group_actions[0].choices[verb[1]]  # noqa: SLF001
        return {s: a.dest for a in p._actions for s in a.option_strings  # noqa: SLF001
                if a.dest.startswith("set:model.")}

    train, classify, memory = model_flags("train"), model_flags("classify", "train"), model_flags("memory")
    assert train == memory
    assert classify == {flag: dest for flag, dest in train.items()
                        if flag not in ("--decoder-layers", "--share-embeddings", "--tie-embeddings")}
    assert train["--layers"] == "set:model.layers" and train["--heads"] == "set:model.num_heads"
