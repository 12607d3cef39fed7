"""``transformer demo`` end to end at a reduced size, and its bad input."""

from __future__ import annotations

import json

from transformer.cli import main
from transformer.data.builtin_task import number_task_splits
from transformer.data.tokenizer import UNK_ID
from transformer.model_dir import load_model_dir


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
    # validation reports what means something for one-word targets: no BLEU (always 0 here)
    valid = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    valid = [r for r in valid if r.get("kind") == "valid"]
    assert valid and all("exact_match" in r and "chrf" in r and "bleu" not in r for r in valid)
    # the tokenizer covers every character of the task ("ö" of "zwölf" included): no <unk>
    tok = load_model_dir(out).tgt_tokenizer
    splits = number_task_splits(0)
    texts = [t for split in splits.values() for t in (*split.src, *split.tgt)]
    assert "zwölf" in texts
    assert all(UNK_ID not in ids for ids in tok.encode_batch(texts))
    assert tok.decode(tok.encode("dreihundertzwölf")) == "dreihundertzwölf"
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
