"""``transformer demo`` end to end at a reduced size, and its bad input."""

from __future__ import annotations

from transformer.cli import main


def test_demo_runs_end_to_end_at_a_reduced_size(cli, tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--max-steps", "20", "--minutes", "1", "--json",
                 "--no-progress"]) == 0
    summary = cli.json_out(capsys)
    assert summary["steps"] == 20
    assert 0.0 <= summary["test"]["exact_match"] <= 1.0 and summary["test"]["num_examples"] == 500
    assert len(summary["examples"]) == 8
    assert (out / "attention.png").stat().st_size > 1000
    assert {"config.json", "model.safetensors", "tokenizer", "checkpoint"} <= {p.name for p in out.iterdir()}
    # a second demo run replaces the first one's results
    assert main(["demo", "--out", str(out), "--max-steps", "2", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "exact match" in text and str(out) in text


def test_demo_bad_device_exit_2(cli, tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "d"), "--device", "tpu"]) == 2
    assert "tpu" in cli.error_line(capsys)


def test_demo_refuses_a_directory_of_another_kind(cli, trained_run, capsys):
    assert main(["demo", "--out", str(trained_run), "--max-steps", "1"]) == 2
    assert "not a demo run" in cli.error_line(capsys)


def test_full_demo_reaches_90_percent_exact_match(cli, tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo"), "--json", "--no-progress"]) == 0
    summary = cli.json_out(capsys)
    assert summary["test"]["exact_match"] >= 0.9
