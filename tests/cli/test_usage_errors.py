"""Errors speak in flags: a configuration error names the flag as typed (``--train-tgt``, not
``train_tgt``), a bad choice lists the choices in one line with a "did you mean", and a usage
error prints three lines (short usage, the error, where the help is), not the whole usage."""

from __future__ import annotations

import pytest

from transformer.cli import main
from transformer.cli.classify import CLASSIFIER_FLAGS
from transformer.cli.common import MODEL_FLAGS, RUN_FLAGS, flag_names
from transformer.cli.train import TRANSLATION_FLAGS
from transformer.config import ModelConfig
from transformer.config.field_error import ChoiceError, ConfigError
from transformer.config.runs import ClassifierTrainConfig, TranslationTrainConfig


def _usage_error(capsys, argv: list[str]) -> list[str]:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()


def test_train_src_alone_names_the_flags(capsys, cli):
    assert main(["train", "--train-src", "x.en"]) == 2
    err = cli.one_line_error(capsys)
    assert "--train-tgt" in err and "--data" in err and "train_tgt" not in err


def test_valid_src_alone_names_the_flags(capsys, cli):
    assert main(["train", "--valid-src", "x.en"]) == 2
    err = cli.one_line_error(capsys)
    assert "--valid-src and --valid-tgt" in err and "valid_tgt" not in err


def test_a_configuration_choice_lists_its_values_in_one_line_with_a_guess():
    with pytest.raises(ChoiceError) as refused:
        TranslationTrainConfig(data="numbers", max_steps=1, metric="blue")
    assert refused.value.fields == ("metric",)
    assert (refused.value.named(flag_names(TRANSLATION_FLAGS)) == "--metric must be one of "
            "bleu, chrf, exact_match, got 'blue' (did you mean 'bleu'?)")


def _named(tables, **fields) -> tuple[str, str]:
    """The ConfigError a classifier configuration of ``fields`` raises: as the library says it,
    and in the flags of ``tables``."""
    with pytest.raises(ConfigError) as refused:
        ClassifierTrainConfig(**fields)
    return str(refused.value), refused.value.named(flag_names(*tables))


def test_an_error_names_the_flags_of_the_fields_it_marks_and_no_other_word():
    assert _named([RUN_FLAGS], schedule="linear", epochs=None) == (
        "the linear schedule needs epochs or max_steps to plan its decay",
        "the linear schedule needs --epochs or --max-steps to plan its decay")
    decoder = ModelConfig.small(vocab_size=8000, num_encoder_layers=2, num_decoder_layers=1)
    assert _named([MODEL_FLAGS], model=decoder) == (
        "a classifier has no decoder: model.num_decoder_layers must be 0, got 1",
        "a classifier has no decoder: --decoder-layers must be 0, got 1")
    wide = ModelConfig.small(vocab_size=8000, num_encoder_layers=2, num_decoder_layers=0,
                             max_len=96)
    assert _named([MODEL_FLAGS, CLASSIFIER_FLAGS], model=wide, batch_tokens=10) == (
        "batch_tokens=10 is below model.max_len=96", "--batch-tokens 10 is below --max-len 96")
    # a field without a flag in the tables keeps its name
    assert _named([MODEL_FLAGS], model=wide, batch_tokens=10)[1] == \
        "batch_tokens=10 is below --max-len 96"


def test_a_bad_choice_is_three_lines_with_a_guess(capsys):
    err = _usage_error(capsys, ["train", "--preset", "smal"])
    assert err == [
        "usage: transformer train [options]",
        "transformer train: error: argument --preset: invalid choice: 'smal'; choose from tiny, "
        "small, base, big, multi30k-cpu (did you mean 'small'?)",
        "see `transformer train --help`",
    ]


def test_precision_choices_are_listed_plainly(capsys):
    err = _usage_error(capsys, ["train", "--precision", "fp64"])
    assert len(err) == 3 and "choose from auto, fp32, bf16, fp16" in err[1] and "('" not in err[1]


@pytest.mark.parametrize("argv, prog", [
    (["classify", "train", "--pooling", "max"], "transformer classify train"),
    (["classify", "trian"], "transformer classify"),
    (["tranlate"], "transformer"),
    (["memory", "--batch-size", "x"], "transformer memory"),
])
def test_every_parser_prints_a_short_usage(capsys, argv, prog):
    err = _usage_error(capsys, argv)
    assert len(err) == 3, err
    assert err[0].startswith(f"usage: {prog}") and err[1].startswith(f"{prog}: error: ")
    assert err[2] == f"see `{prog} --help`"


@pytest.mark.parametrize("spelling", ["--heads", "--num-heads"])
def test_an_error_names_a_flag_as_it_was_typed(capsys, spelling):
    """--heads is --num-heads' old spelling: the error says what the user wrote."""
    from transformer.cli import main

    assert main(["memory", spelling, "5", "--d-model", "32"]) == 2
    err = capsys.readouterr().err
    assert err == f"transformer: error: --d-model 32 is not divisible by {spelling} 5\n"
