"""The `memory` verb: estimate and measure from the command line, and bad values exit 2."""

from __future__ import annotations

import json

import pytest

from transformer import ModelConfig, Transformer
from transformer.cli import main


def test_command_line_estimate_and_measure(capsys):
    argv = ["memory", "--preset", "tiny", "--vocab-size", "300", "--batch-size", "4",
            "--src-len", "12", "--device", "cpu", "--measure", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["parameters"] == Transformer(ModelConfig.tiny(vocab_size=300)).num_parameters()
    assert 0.75 < out["ratio"] < 1.25
    assert out["measured"]["device"] == "cpu"
    names = [line["name"] for line in out["lines"]]
    for name in ("parameters", "gradients", "optimizer state", "activations: encoder",
                 "activations: decoder", "loss"):
        assert name in names

    assert main(["memory", "--preset", "tiny", "--encoder-only", "--num-labels", "3",
                 "--max-tokens", "256", "--src-len", "32", "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "encoder-only" in text and "batch 8 x 32 tokens" in text


@pytest.mark.parametrize("argv, fragment", [
    (["--d-model", "30", "--heads", "4"], "--d-model 30 is not divisible by --heads 4"),
    (["--src-len", "300"], "--src-len 300 exceeds the model's --max-len 256"),
    (["--batch-size", "0"], "--batch-size must be a positive integer, got 0"),
    (["--decoder-only", "--measure"], "--decoder-only"),
    (["--vocab-size", "0"], "--vocab-size must be a positive integer, got 0"),
    (["--src-vocab", "0"], "--src-vocab must be a positive integer, got 0"),
    (["--max-tokens", "1"], "--max-tokens 1 is smaller than one row"),
])
def test_command_line_bad_values_exit_2_naming_the_flag(capsys, argv, fragment):
    assert main(["memory", *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "_" not in err
