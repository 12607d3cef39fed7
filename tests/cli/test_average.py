"""``transformer average``: the mean of model directories, or of a run's last snapshots."""

from __future__ import annotations

import json

import torch

from transformer.cli import main
from transformer.model_dir import load_model_dir


def test_average(cli, tmp_path, tokenizer, capsys):
    a = cli.make_run(tmp_path / "a", tokenizer, seed=1)
    b = cli.make_run(tmp_path / "b", tokenizer, seed=2)
    out = tmp_path / "avg"
    assert main(["average", "--models", str(a), str(b), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["averaged_from"] == [str(a), str(b)]
    ma, mb, avg = (load_model_dir(p).model.state_dict() for p in (a, b, out))
    for name, tensor in avg.items():
        if tensor.is_floating_point():
            torch.testing.assert_close(tensor, (ma[name] + mb[name]) / 2)
    assert main(["translate", "--model", str(out), "-i", str(cli.write(tmp_path / "x", ["one"]))]) == 0
    capsys.readouterr()

    assert main(["average", "--models", str(a), str(b), "--out", str(out)]) == 2
    assert "--overwrite" in cli.one_line_error(capsys)
    other = cli.make_run(tmp_path / "other", tokenizer, d_ff=48)
    assert main(["average", "--models", str(a), str(other), "--out", str(tmp_path / "o2")]) == 2
    assert "model.d_ff: 64 vs 48" in cli.one_line_error(capsys)
    assert not (tmp_path / "o2").exists()
    assert main(["average", "--models", str(a), "--out", str(tmp_path / "o3")]) == 2
    assert "at least two" in cli.one_line_error(capsys)
    assert main(["average", "--models", str(a), str(tmp_path / "nope"), "--out",
                 str(tmp_path / "o4")]) == 2
    assert "nope" in cli.one_line_error(capsys)


def test_average_last_keeps_snapshots_and_validates_their_mean(cli, number_files, tmp_path, capsys):
    from safetensors.torch import load_file

    from transformer.model_dir import load_model_dir
    from transformer.training.checkpoint import list_snapshots

    run = tmp_path / "run"
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, "--max-steps", "6", "--eval-every", "2",
                 "--average-last", "2", "--out", str(run), "--json"]) == 0
    summary = cli.json_out(capsys)
    assert [step for step, _ in list_snapshots(run)] == [4, 6]  # the newest two of 2, 4, 6
    assert summary["average"]["snapshots"] == [4, 6]
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["snapshots"] for r in records if r["kind"] == "average"] == [[4, 6]]

    # the same average by hand: the mean of the two snapshot files, tensor by tensor
    assert main(["average", "--models", str(run), "--last", "2", "--out", str(tmp_path / "avg"),
                 "--json"]) == 0
    assert cli.json_out(capsys)["steps"] == [4, 6]
    a, b = (load_file(str(path)) for _, path in list_snapshots(run))
    averaged = load_model_dir(tmp_path / "avg").model.state_dict()
    for name in a:
        torch.testing.assert_close(averaged[name], (a[name] + b[name]) / 2)
    assert main(["average", "--models", str(run), "--last", "3", "--out", str(tmp_path / "x")]) == 2
    assert "2 snapshot(s), fewer than --last 3" in cli.error_line(capsys)
    assert not (tmp_path / "x").exists()
