"""Errors speak in flags: a configuration error names the flag as typed (``--train-tgt``, not
``train_tgt``), a bad choice lists the choices in one line with a "did you mean", and a usage
error prints three lines (short usage, the error, where the help is), not the whole usage."""

from __future__ import annotations

import pytest

from transformer.cli import main
from transformer.cli.common import MODEL_FLAGS, RUN_FLAGS, flagged
from transformer.cli.train import TRANSLATION_FLAGS


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
    message = flagged("metric must be one of ('bleu', 'chrf'), got 'blue'", TRANSLATION_FLAGS)
    assert message == "--metric must be one of bleu, chrf, got 'blue' (did you mean 'bleu'?)"


def test_plain_words_become_flags_only_where_used_as_fields():
    assert (flagged("the linear schedule needs epochs or max_steps to plan its decay", RUN_FLAGS)
            == "the linear schedule needs --epochs or --max-steps to plan its decay")
    assert (flagged("a classifier has no decoder: model.num_decoder_layers must be 0", MODEL_FLAGS)
            == "a classifier has no decoder: --decoder-layers must be 0")
    assert flagged("batch_tokens=10 is below max_len=96", MODEL_FLAGS) == \
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
