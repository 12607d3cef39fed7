"""``train --config FILE`` and ``classify train --config FILE``: the round trip ``config show ...
> c.json; train --config c.json`` runs exactly what the flags would (the same config.json, the same
losses and weights), flags beside the file change single fields (only those typed: no parser
default overrides the file), and a bad file is one line naming it and the key (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from transformer.cli import build_parser, main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TIMING = {"elapsed_s", "tokens_per_s", "eta_s"}
# what the flags change from the presets, so that a file that lost them would show
CHANGES = ["--warmup", "7", "--seed", "3", "--clip-norm", "0.5", "--label-smoothing", "0.05",
           "--max-steps", "20", "--eval-every", "10"]


def show(capsys, tmp_path, *argv: str) -> Path:
    """``config show ARGV > c.json``."""
    capsys.readouterr()
    assert main(["config", "show", *argv]) == 0
    path = tmp_path / "c.json"
    path.write_text(capsys.readouterr().out)
    return path


def metrics(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def assert_same_weights(a: Path, b: Path) -> None:
    for name in ("model.safetensors", "checkpoint/model.safetensors"):
        left, right = load_file(str(a / name)), load_file(str(b / name))
        assert left.keys() == right.keys()
        assert all(torch.equal(left[k], right[k]) for k in left), name


def test_train_config_round_trip_runs_what_the_flags_would(cli, number_files, tmp_path, capsys):
    tiny = cli.TINY[2:]  # without --preset tiny
    flags = [*cli.data_flags(number_files), *tiny, *CHANGES]
    assert main(["train", "--preset", "tiny", *flags, "--log-every", "1", "--out",
                 str(tmp_path / "flags")]) == 0
    path = show(capsys, tmp_path, "tiny", *flags)
    assert main(["train", "--config", str(path), "--log-every", "1", "--threads", "1",
                 "--no-progress", "--out", str(tmp_path / "file")]) == 0
    configs = [json.loads((tmp_path / run / "config.json").read_text()) for run in ("flags", "file")]
    assert configs[0] == configs[1]
    assert len([r for r in metrics(tmp_path / "file") if r["kind"] == "train"]) == 20
    assert metrics(tmp_path / "flags") == metrics(tmp_path / "file")
    assert_same_weights(tmp_path / "flags", tmp_path / "file")


def test_classify_train_config_round_trip_runs_what_the_flags_would(tmp_path, capsys):
    data = ["--train", str(EXAMPLES / "topics-train.tsv"), "--valid",
            str(EXAMPLES / "topics-valid.tsv"), "--multi-label", "--threads", "1", "--no-progress"]
    # multi-label: no label smoothing
    flags = ["--vocab-size", "300", "--precision", "fp32", *CHANGES[:6], *CHANGES[8:]]
    assert main(["classify", "train", "--preset", "tiny", *flags, *data, "--out",
                 str(tmp_path / "flags")]) == 0
    path = show(capsys, tmp_path, "tiny", "--task", "classification", "--data", "nsmc", *flags)
    assert main(["classify", "train", "--config", str(path), *data, "--out",
                 str(tmp_path / "file")]) == 0
    configs = [json.loads((tmp_path / run / "config.json").read_text()) for run in ("flags", "file")]
    assert configs[0]["data"].pop("preset") == "tiny" and configs[1]["data"].pop("preset") is None
    assert configs[0] == configs[1]
    assert metrics(tmp_path / "flags") == metrics(tmp_path / "file")
    assert_same_weights(tmp_path / "flags", tmp_path / "file")


@pytest.mark.parametrize("verb, preset", [(["train"], "multi30k-cpu"),
                                          (["classify", "train"], "nsmc-cpu")])
def test_only_the_flags_typed_change_the_file(verb, preset, tmp_path, capsys):
    """Every flag the verb's parser has, left out, leaves the file's value; a flag typed changes
    that field alone."""
    from transformer.cli import classify, train

    path = show(capsys, tmp_path, preset, "--seed", "9", "--eval-every", "77")
    stored = json.loads(path.read_text())["training"]
    config_of = train.config_of if verb == ["train"] else lambda a: classify.config_of(a)[0]
    parse = build_parser().parse_args
    assert json.loads(json.dumps(config_of(parse([*verb, "--config", str(path)])).to_dict())) \
        == stored
    changed = config_of(parse([*verb, "--config", str(path), "--warmup", "5", "--d-model", "64"]))
    assert json.loads(json.dumps(changed.to_dict())) == {
        **stored, "warmup": 5, "model": {**stored["model"], "d_model": 64}}


def test_a_training_data_flag_replaces_the_files_data(cli, number_files, tmp_path, capsys):
    from transformer.cli import train

    path = show(capsys, tmp_path, "tiny", "--valid-src", "v.en", "--valid-tgt", "v.de")
    args = build_parser().parse_args(["train", "--config", str(path), "--train-src", "a.en",
                                      "--train-tgt", "a.de"])
    config = train.config_of(args)
    assert (config.data, config.train_src, config.valid_src) == (None, "a.en", None)


@pytest.mark.parametrize("edit, words", [
    (lambda c: c["training"].update(warmpu=3), "training.warmpu: unknown key (did you mean 'warmup'?)"),
    (lambda c: c["training"]["model"].update(d_model="64"),
     'training.model.d_model: expected an integer, got "64"'),
    (lambda c: c.update(comment="mine"), "unknown key 'comment'"),
    (lambda c: c.update(task="classification"), "a classification configuration"),
])
def test_a_bad_file_is_one_line_naming_it_and_the_key(cli, tmp_path, capsys, edit, words):
    path = show(capsys, tmp_path, "tiny")
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))
    run = tmp_path / "runs" / "new"
    assert main(["train", "--config", str(path), "--out", str(run), "--threads", "1"]) == 2
    line = cli.error_line(capsys)
    assert f"{path}: " in line and words in line
    assert not run.parent.exists()


@pytest.mark.parametrize("extra, words", [
    (["--preset", "tiny"], "give it without --preset"),
    (["--warmup", "0"], "--warmup must be "),  # at least 1; a positive integer
])
def test_flags_beside_the_file_are_checked_as_flags(cli, tmp_path, capsys, extra, words):
    for verb, task in ((["train"], "translation"),
                       (["classify", "train", "--data", "nsmc"], "classification")):
        path = show(capsys, tmp_path, "tiny", "--task", task, "--data", "numbers"
                    if task == "translation" else "nsmc")
        assert main([*verb, "--config", str(path), *extra, "--out", str(tmp_path / "r")]) == 2
        assert words in cli.error_line(capsys)


def test_resume_refuses_a_config_file(cli, trained_run, tmp_path, capsys):
    path = show(capsys, tmp_path, "tiny")
    assert main(["train", "--resume", str(trained_run), "--config", str(path)]) == 2
    assert "--config cannot change" in cli.error_line(capsys)
