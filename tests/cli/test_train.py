"""`transformer train` and `transformer demo` end to end on tiny sizes, and their bad input."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from transformer.cli import main

TINY = ["--preset", "tiny", "--d-model", "16", "--d-ff", "32", "--num-heads", "2", "--layers", "1",
        "--vocab-size", "60", "--no-byte-fallback", "--max-tokens", "256", "--bleu-sample", "8",
        "--threads", "1", "--no-progress"]


@pytest.fixture(scope="module")
def number_files(tmp_path_factory):
    """Tiny parallel files of English and German number words (train 120 pairs, valid 10)."""
    from transformer.data.builtin_task import number_task_splits

    splits = number_task_splits(0, train_size=120, valid_size=10, test_size=10, max_number=9999)
    root = tmp_path_factory.mktemp("numbers")
    files = {}
    for split in ("train", "valid"):
        for side, lines in (("src", splits[split].src), ("tgt", splits[split].tgt)):
            path = root / f"{split}.{side}"
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            files[f"{split}_{side}"] = str(path)
    return files


def data_flags(files):
    return ["--train-src", files["train_src"], "--train-tgt", files["train_tgt"],
            "--valid-src", files["valid_src"], "--valid-tgt", files["valid_tgt"]]


def json_out(capsys):
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    return json.loads(out[0])


def error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("transformer: error:")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err)
    return errors[0]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, number_files):
    """A run of 4 updates (evaluated at 2 and 4), kept as a template for the resume tests."""
    run = tmp_path_factory.mktemp("runs") / "run"
    code = main(["train", *data_flags(number_files), *TINY, "--max-steps", "4",
                 "--eval-every", "2", "--log-every", "1", "--out", str(run), "--json"])
    assert code == 0
    return run


def copy_run(trained_run, tmp_path):
    target = tmp_path / "run"
    shutil.copytree(trained_run, target)
    return target


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


def test_resume_continues_and_takes_a_new_budget(trained_run, tmp_path, capsys):
    run = copy_run(trained_run, tmp_path)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--max-steps", "6", "--json", "--no-progress",
                 "--threads", "1"]) == 0
    summary = json_out(capsys)
    assert summary["steps"] == 6 and summary["stopped_by"] == "max_steps"
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and steps[-1] == 6


def test_resume_refuses_to_change_the_configuration(trained_run, tmp_path, capsys):
    run = copy_run(trained_run, tmp_path)
    assert main(["train", "--resume", str(run), "--d-model", "32"]) == 2
    assert "--d-model" in error_line(capsys)


def test_out_holding_a_model_needs_overwrite(trained_run, number_files, capsys):
    assert main(["train", *data_flags(number_files), *TINY, "--max-steps", "1",
                 "--out", str(trained_run)]) == 2
    assert "--overwrite" in error_line(capsys)


def test_corrupt_weights_exit_2(trained_run, tmp_path, capsys):
    run = copy_run(trained_run, tmp_path)
    (run / "checkpoint" / "model.safetensors").write_bytes(b"\x00" * 100)
    assert main(["train", "--resume", str(run), "--max-steps", "6"]) == 2
    assert "model.safetensors" in error_line(capsys)


def test_checkpoint_of_another_configuration_exit_2(trained_run, number_files, tmp_path, capsys):
    run = copy_run(trained_run, tmp_path)
    other = tmp_path / "other"
    assert main(["train", *data_flags(number_files), *TINY, "--d-ff", "48", "--max-steps", "1",
                 "--out", str(other)]) == 0
    shutil.rmtree(run / "checkpoint")
    shutil.copytree(other / "checkpoint", run / "checkpoint")
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--max-steps", "6"]) == 2
    line = error_line(capsys)
    assert "does not match" in line and "shape" in line


def test_tokenizer_of_another_vocabulary_exit_2(trained_run, number_files, tmp_path, capsys):
    run = copy_run(trained_run, tmp_path)
    other = tmp_path / "other"
    assert main(["train", *data_flags(number_files), *TINY, "--vocab-size", "50", "--max-steps", "1",
                 "--out", str(other)]) == 0
    shutil.rmtree(run / "tokenizer")
    shutil.copytree(other / "tokenizer", run / "tokenizer")
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--max-steps", "6"]) == 2
    assert "vocabulary" in error_line(capsys)


def test_missing_training_file_exit_2(tmp_path, capsys):
    assert main(["train", "--train-src", str(tmp_path / "nope.en"), "--train-tgt",
                 str(tmp_path / "nope.de"), *TINY, "--max-steps", "1", "--out",
                 str(tmp_path / "run")]) == 2
    assert "nope.en" in error_line(capsys)


@pytest.mark.parametrize("flags", [["--max-steps", "0"], ["--precision", "fp16", "--device", "cpu"],
                                   ["--device", "gpu"],
                                   ["--schedule", "cosine"], ["--metric", "rouge"]])
def test_bad_values_exit_2(number_files, tmp_path, capsys, flags):
    assert main(["train", *data_flags(number_files), *TINY, "--max-steps", "1", *flags,
                 "--out", str(tmp_path / "run")]) == 2
    error_line(capsys)


def test_demo_runs_end_to_end_at_a_reduced_size(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--max-steps", "20", "--minutes", "1", "--json",
                 "--no-progress"]) == 0
    summary = json_out(capsys)
    assert summary["steps"] == 20
    assert 0.0 <= summary["test"]["exact_match"] <= 1.0 and summary["test"]["num_examples"] == 500
    assert len(summary["examples"]) == 8
    assert (out / "attention.png").stat().st_size > 1000
    assert {"config.json", "model.safetensors", "tokenizer", "checkpoint"} <= {p.name for p in out.iterdir()}
    # a second demo run replaces the first one's results
    assert main(["demo", "--out", str(out), "--max-steps", "2", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "exact match" in text and str(out) in text


def test_demo_bad_device_exit_2(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "d"), "--device", "tpu"]) == 2
    assert "tpu" in error_line(capsys)


def test_demo_refuses_a_directory_of_another_kind(trained_run, capsys):
    assert main(["demo", "--out", str(trained_run), "--max-steps", "1"]) == 2
    assert "not a demo run" in error_line(capsys)


@pytest.mark.slow
def test_full_demo_reaches_90_percent_exact_match(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo"), "--json", "--no-progress"]) == 0
    summary = json_out(capsys)
    assert summary["test"]["exact_match"] >= 0.9


def test_average_last_keeps_snapshots_and_validates_their_mean(number_files, tmp_path, capsys):
    from safetensors.torch import load_file

    from transformer.model_dir import load_model_dir
    from transformer.training.checkpoint import list_snapshots

    run = tmp_path / "run"
    assert main(["train", *data_flags(number_files), *TINY, "--max-steps", "6", "--eval-every", "2",
                 "--average-last", "2", "--out", str(run), "--json"]) == 0
    summary = json_out(capsys)
    assert [step for step, _ in list_snapshots(run)] == [4, 6]  # the newest two of 2, 4, 6
    assert summary["average"]["snapshots"] == [4, 6]
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["snapshots"] for r in records if r["kind"] == "average"] == [[4, 6]]

    # the same average by hand: the mean of the two snapshot files, tensor by tensor
    assert main(["average", "--models", str(run), "--last", "2", "--out", str(tmp_path / "avg"),
                 "--json"]) == 0
    assert json_out(capsys)["steps"] == [4, 6]
    a, b = (load_file(str(path)) for _, path in list_snapshots(run))
    averaged = load_model_dir(tmp_path / "avg").model.state_dict()
    for name in a:
        torch.testing.assert_close(averaged[name], (a[name] + b[name]) / 2)
    assert main(["average", "--models", str(run), "--last", "3", "--out", str(tmp_path / "x")]) == 2
    assert "2 snapshot(s), fewer than --last 3" in error_line(capsys)
    assert not (tmp_path / "x").exists()


def test_resume_drops_snapshots_newer_than_the_checkpoint(number_files, tmp_path, capsys):
    from transformer.training.checkpoint import list_snapshots, save_snapshot

    run = tmp_path / "run"
    assert main(["train", *data_flags(number_files), *TINY, "--max-steps", "2", "--eval-every", "2",
                 "--average-last", "3", "--out", str(run), "--json"]) == 0
    capsys.readouterr()
    (stray,) = list_snapshots(run)
    save_snapshot(run, torch.nn.Linear(1, 1), step=3, keep=3)  # as if killed after a snapshot
    assert main(["train", "--resume", str(run), "--max-steps", "4", "--json", "--no-progress",
                 "--threads", "1"]) == 0
    capsys.readouterr()
    assert [step for step, _ in list_snapshots(run)] == [2, 4]
    assert stray[1].is_file()


def test_recipe_preset_with_overrides(number_files, tmp_path, capsys):
    from transformer.config.presets import TRANSLATION_PRESETS

    recipe = TRANSLATION_PRESETS["multi30k-cpu"]
    run = tmp_path / "run"
    flags = [f for f in TINY if f not in ("--preset", "tiny")]
    assert main(["train", *data_flags(number_files), "--preset", "multi30k-cpu", *flags,
                 "--max-steps", "28", "--out", str(run), "--json"]) == 0
    summary = json_out(capsys)
    assert summary["stopped_by"] == "max_steps"  # a stop flag replaces the recipe's budget
    config = json.loads((run / "config.json").read_text())
    model, training = config["model"], config["training"]
    assert model["d_model"] == 16 and model["num_encoder_layers"] == 1  # flags win
    assert model["dropout"] == recipe.model_changes["dropout"]  # the rest is the recipe's
    assert model["tie_embeddings"] and model["share_embeddings"]
    assert training["lr"] == recipe.run["lr"]
    assert training["average_last"] == recipe.run["average_last"]
    assert training["vocab_size"] == 60 and training["minutes"] is None
    # the recipe's cool-down keeps its share of the updates: 1800 of 5600 -> 9 of 28
    share = recipe.run["cooldown"] / recipe.budget["max_steps"]
    assert training["cooldown"] == round(share * 28) == 9
