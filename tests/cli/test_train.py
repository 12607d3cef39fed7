"""``transformer train`` end to end on tiny sizes: resume, recipes, and bad input."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from transformer.cli import main


def test_train_writes_the_model_directory(trained_run):
    names = {p.name for p in trained_run.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer", "checkpoint", "metrics.jsonl"} <= names
    config = json.loads((trained_run / "config.json").read_text())
    assert config["task"] == "translation" and config["model"]["d_model"] == 16
    assert config["training"]["max_steps"] == 4
    records = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4]
    assert [r["step"] for r in records if r["kind"] == "valid"] == [2, 4]
    assert all("bleu" in r for r in records if r["kind"] == "valid")


def test_resume_continues_and_takes_a_new_budget(cli, trained_run, number_files, tmp_path, capsys):
    run = cli.copy_run(trained_run, tmp_path)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--max-steps", "6", "--json", "--no-progress",
                 "--threads", "1"]) == 0
    summary = cli.json_out(capsys)
    assert summary["steps"] == 6 and summary["stopped_by"] == "max_steps"
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and steps[-1] == 6
    # the real reader, tokenizer and BLEU validation: the weights of a straight 6-update run
    from safetensors.torch import load_file

    straight = tmp_path / "straight"
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, "--max-steps", "6",
                 "--eval-every", "2", "--log-every", "1", "--out", str(straight)]) == 0
    for name in ("checkpoint/model.safetensors", "model.safetensors"):
        a, b = load_file(str(straight / name)), load_file(str(run / name))
        assert all(torch.equal(a[k], b[k]) for k in a), name


def test_resume_refuses_to_change_the_configuration(cli, trained_run, tmp_path, capsys):
    run = cli.copy_run(trained_run, tmp_path)
    assert main(["train", "--resume", str(run), "--d-model", "32"]) == 2
    assert "--d-model" in cli.error_line(capsys)


def test_out_holding_a_model_needs_overwrite(cli, trained_run, number_files, capsys):
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, "--max-steps", "1",
                 "--out", str(trained_run)]) == 2
    assert "--overwrite" in cli.error_line(capsys)


def test_corrupt_weights_exit_2(cli, trained_run, tmp_path, capsys):
    run = cli.copy_run(trained_run, tmp_path)
    (run / "checkpoint" / "model.safetensors").write_bytes(b"\x00" * 100)
    assert main(["train", "--resume", str(run), "--max-steps", "6"]) == 2
    assert "model.safetensors" in cli.error_line(capsys)


@pytest.mark.parametrize("part, flags, words", [
    ("checkpoint", ["--d-ff", "48"], ("does not match", "shape")),  # another configuration's
    ("tokenizer", ["--vocab-size", "50"], ("vocabulary",)),  # another vocabulary's
])
def test_a_part_of_another_run_is_refused_on_resume_exit_2(cli, trained_run, number_files, tmp_path,
                                                           capsys, part, flags, words):
    run = cli.copy_run(trained_run, tmp_path)
    other = tmp_path / "other"
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, *flags, "--max-steps", "1",
                 "--out", str(other)]) == 0
    shutil.rmtree(run / part)
    shutil.copytree(other / part, run / part)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--max-steps", "6"]) == 2
    line = cli.error_line(capsys)
    assert all(word in line for word in words), line


def test_missing_training_file_exit_2(cli, tmp_path, capsys):
    assert main(["train", "--train-src", str(tmp_path / "nope.en"), "--train-tgt",
                 str(tmp_path / "nope.de"), *cli.TINY, "--max-steps", "1", "--out",
                 str(tmp_path / "run")]) == 2
    assert "nope.en" in cli.error_line(capsys)


@pytest.mark.parametrize("flags", [["--max-steps", "0"], ["--precision", "fp16", "--device", "cpu"],
                                   ["--device", "gpu"]])
def test_bad_values_exit_2(cli, number_files, tmp_path, capsys, flags):
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, "--max-steps", "1", *flags,
                 "--out", str(tmp_path / "run")]) == 2
    cli.error_line(capsys)


@pytest.mark.parametrize("flags", [["--schedule", "cosine"], ["--metric", "rouge"]])
def test_bad_choices_are_usage_errors(cli, number_files, tmp_path, capsys, flags):
    with pytest.raises(SystemExit) as exit_:
        main(["train", *cli.data_flags(number_files), *cli.TINY, *flags])
    assert exit_.value.code == 2
    assert f"argument {flags[0]}: invalid choice" in capsys.readouterr().err


def test_resume_with_a_new_max_steps_cools_down_at_its_end(cli, number_files, tmp_path, capsys):
    """``train --max-steps 4 --cooldown 2``, then ``--resume RUN --max-steps 8``: the schedule
    follows the new budget (its cool-down ends at update 8), as ``config show`` would plan it."""
    from transformer.config.runs import TranslationTrainConfig
    from transformer.training.schedule import LRSchedule

    run = tmp_path / "run"
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, "--max-steps", "4",
                 "--cooldown", "2", "--eval-every", "2", "--log-every", "1", "--out", str(run)]) == 0
    assert main(["train", "--resume", str(run), "--max-steps", "8", "--no-progress"]) == 0
    capsys.readouterr()
    config = json.loads((run / "config.json").read_text())
    cfg = TranslationTrainConfig.from_dict(config["training"])
    planned = LRSchedule(**cfg.replace(max_steps=8).schedule_for(config["model"]["d_model"]))
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    rates = {r["step"]: r["lr"] for r in records if r["kind"] == "train"}  # the next update's
    assert [rates[step] for step in (5, 6, 7)] == [planned.rate(step + 1) for step in (5, 6, 7)]
    assert rates[5] > rates[7]  # full rate at update 6, cooled down at update 8
    # a budget the cool-down cannot fit in is refused, naming the flag
    assert main(["train", "--resume", str(run), "--max-steps", "1", "--no-progress"]) == 2
    assert "(--max-steps), got 1" in cli.error_line(capsys)


def test_resume_drops_snapshots_newer_than_the_checkpoint(cli, number_files, tmp_path, capsys):
    from transformer.training.checkpoint import list_snapshots, save_snapshot

    run = tmp_path / "run"
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, "--max-steps", "2", "--eval-every", "2",
                 "--average-last", "3", "--out", str(run), "--json"]) == 0
    capsys.readouterr()
    (stray,) = list_snapshots(run)
    save_snapshot(run, torch.nn.Linear(1, 1), step=3, keep=3)  # as if killed after a snapshot
    assert main(["train", "--resume", str(run), "--max-steps", "4", "--json", "--no-progress",
                 "--threads", "1"]) == 0
    capsys.readouterr()
    assert [step for step, _ in list_snapshots(run)] == [2, 4]
    assert stray[1].is_file()


def test_recipe_preset_with_overrides(cli, number_files, tmp_path, capsys):
    from transformer.config.presets import TRANSLATION_PRESETS

    recipe = TRANSLATION_PRESETS["multi30k-cpu"]
    run = tmp_path / "run"
    flags = [f for f in cli.TINY if f not in ("--preset", "tiny")]
    assert main(["train", *cli.data_flags(number_files), "--preset", "multi30k-cpu", *flags,
                 "--max-steps", "28", "--log-every", "1", "--out", str(run), "--json"]) == 0
    summary = cli.json_out(capsys)
    assert summary["stopped_by"] == "max_steps"  # a stop flag replaces the recipe's budget
    config = json.loads((run / "config.json").read_text())
    model, training = config["model"], config["training"]
    assert model["d_model"] == 16 and model["num_encoder_layers"] == 1  # flags win
    assert model["dropout"] == recipe.model_changes["dropout"]  # the rest is the recipe's
    assert model["tie_embeddings"] and model["share_embeddings"]
    assert training["lr"] == recipe.run["lr"]
    assert training["average_last"] == recipe.run["average_last"]
    assert training["vocab_size"] == 60 and training["minutes"] is None
    # the recipe's cool-down is a share of whatever the budget is: here the last third of 28 updates
    assert training["cooldown_share"] == recipe.run["cooldown_share"] and training["cooldown"] == 0
    rates = [r["lr"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
             if r["kind"] == "train"]
    assert rates[-1] < 0.2 * max(rates)
