"""``transformer prepare`` and ``transformer train --data-dir`` end to end on tiny sizes: the same
losses as training from the text files, an exact resume after a kill, a changed manifest refused,
and bad input."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from transformer.cli import main

STEPS = ["--max-steps", "20", "--eval-every", "10", "--log-every", "1"]


def records(run: Path) -> list[dict]:
    timing = {"elapsed_s", "tokens_per_s", "eta_s"}
    return [{k: v for k, v in json.loads(line).items() if k not in timing}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def prepare_flags(files, *extra: str) -> list[str]:
    return ["prepare", "--train-src", files["train_src"], "--train-tgt", files["train_tgt"],
            "--valid-src", files["valid_src"], "--valid-tgt", files["valid_tgt"], "--workers", "1",
            "--no-progress", *extra]


@pytest.fixture(scope="module")
def file_run(number_files, tmp_path_factory, cli):
    """A 20-update run from the text files: its tokenizer is the one the data is prepared with."""
    run = tmp_path_factory.mktemp("files") / "run"
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, *STEPS, "--out", str(run)]) == 0
    return run


@pytest.fixture(scope="module")
def data_dir(number_files, file_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared") / "data"
    assert main(prepare_flags(number_files, "--tokenizer-from", str(file_run), "--out", str(out))) == 0
    return out


def tiny(cli) -> list[str]:
    # the model's shape; the tokenizer flags (--vocab-size, --no-byte-fallback) do not apply
    return [flag for flag in cli.TINY if flag not in ("--vocab-size", "60", "--no-byte-fallback")]


def test_data_dir_and_text_files_train_alike_for_20_steps(cli, file_run, data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "--data-dir", str(data_dir), *tiny(cli), *STEPS, "--out", str(run),
                 "--json"]) == 0
    summary = cli.json_out(capsys)
    assert summary["train_pairs"] == json.loads((file_run / "config.json").read_text())["data"]["train_pairs"]
    ours, theirs = records(run), records(file_run)
    assert [r["step"] for r in ours if r["kind"] == "train"] == list(range(1, 21))
    assert ours == theirs  # every loss, norm, learning rate and validation score
    a, b = load_file(str(run / "model.safetensors")), load_file(str(file_run / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    config = json.loads((run / "config.json").read_text())
    assert config["training"]["data_dir"] == str(data_dir) and config["training"]["data"] is None
    manifest = (data_dir / "manifest.json").read_bytes()
    import hashlib

    assert config["data"]["manifest_sha256"] == hashlib.sha256(manifest).hexdigest()


def test_prepare_again_on_the_same_inputs_does_nothing(number_files, file_run, data_dir, capsys):
    before = (data_dir / "manifest.json").stat().st_mtime_ns
    capsys.readouterr()
    assert main(prepare_flags(number_files, "--tokenizer-from", str(file_run), "--out",
                              str(data_dir), "--json")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["up_to_date"] is True and out["train_pairs"] > 0
    assert (data_dir / "manifest.json").stat().st_mtime_ns == before


@pytest.fixture
def mixed(number_files, file_run, tmp_path):
    """Two weighted corpora: the training pairs and the validation pairs (upsampled)."""
    out = tmp_path / "mixed"
    assert main(["prepare", "--train-src", f"{number_files['train_src']},{number_files['valid_src']}",
                 "--train-tgt", f"{number_files['train_tgt']},{number_files['valid_tgt']}",
                 "--weights", "2,1", "--valid-src", number_files["valid_src"], "--valid-tgt",
                 number_files["valid_tgt"], "--tokenizer-from", str(file_run), "--workers", "1",
                 "--no-progress", "--out", str(out)]) == 0
    return out


def kill_during_update(monkeypatch, at: int) -> list[int]:
    """SIGTERM to this process during the forward pass of update ``at`` (the run stops after it)."""
    from transformer.training.translation_task import TranslationTask

    real = TranslationTask.loss
    calls: list[int] = []

    def loss(self, model, batch):
        calls.append(1)
        if len(calls) == at:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, model, batch)

    monkeypatch.setattr(TranslationTask, "loss", loss)
    return calls


def test_kill_and_resume_mid_epoch_equals_a_straight_run(cli, mixed, tmp_path, monkeypatch, capsys):
    flags = ["train", "--data-dir", str(mixed), *tiny(cli), "--max-steps", "12", "--eval-every", "5",
             "--log-every", "1"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main([*flags, "--out", str(straight)]) == 0
    with monkeypatch.context() as patch:
        kill_during_update(patch, 3)
        assert main([*flags, "--out", str(split)]) == 143
    trainer = torch.load(split / "checkpoint" / "state.pt", weights_only=True)["trainer"]
    assert trainer["step"] == 3 and trainer["batch_index"] != 0  # mid-epoch
    assert main(["train", "--resume", str(split), "--threads", "1", "--no-progress"]) == 0
    for name in ("checkpoint/model.safetensors", "model.safetensors"):
        a, b = load_file(str(straight / name)), load_file(str(split / name))
        assert all(torch.equal(a[k], b[k]) for k in a), name
    assert records(split) == records(straight)


def test_a_changed_manifest_is_refused_on_resume(cli, number_files, file_run, tmp_path, capsys):
    data = tmp_path / "data"
    assert main(prepare_flags(number_files, "--tokenizer-from", str(file_run), "--out", str(data))) == 0
    run = tmp_path / "run"
    assert main(["train", "--data-dir", str(data), *tiny(cli), "--max-steps", "2", "--eval-every", "2",
                 "--out", str(run)]) == 0
    assert main(prepare_flags(number_files, "--tokenizer-from", str(file_run), "--filter", "max-len=12",
                              "--out", str(data))) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--max-steps", "4"]) == 2
    line = cli.error_line(capsys)
    assert "manifest.json" in line and "not the prepared data this run started with" in line


def test_data_dir_made_with_another_tokenizer_is_refused(cli, number_files, tmp_path, capsys):
    data = tmp_path / "data"
    assert main(prepare_flags(number_files, "--vocab-size", "70", "--no-byte-fallback",
                              "--out", str(data))) == 0
    capsys.readouterr()
    # fine-tuning from a run whose tokenizer is not the data's
    other = tmp_path / "other"
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, "--max-steps", "1",
                 "--out", str(other)]) == 0
    from transformer.data.prepared.directory import PreparedData
    from transformer.errors import InputError
    from transformer.model_dir import load_tokenizer_dir
    from transformer.training.data_dir_inputs import check_tokenizers

    src, tgt = load_tokenizer_dir(other)
    with pytest.raises(InputError, match="another tokenizer"):
        check_tokenizers(PreparedData.open(data), src, tgt, where=str(other))


@pytest.mark.parametrize(("extra", "named"), [
    (["--train-src", "a.en"], "--train-src"),
    (["--data", "multi30k"], "--data"),
])
def test_data_dir_with_other_data_flags_is_refused(cli, data_dir, extra, named, tmp_path, capsys):
    assert main(["train", "--data-dir", str(data_dir), *extra, *tiny(cli), "--max-steps", "1",
                 "--out", str(tmp_path / "run")]) == 2
    line = cli.error_line(capsys)
    assert "--data-dir" in line and named in line


def test_a_missing_data_dir_is_one_line(cli, tmp_path, capsys):
    assert main(["train", "--data-dir", str(tmp_path / "nope"), *tiny(cli), "--max-steps", "1",
                 "--out", str(tmp_path / "run")]) == 2
    assert "nope" in cli.error_line(capsys)


@pytest.mark.parametrize(("change", "named"), [
    ({"--train-tgt": "SHORT"}, "ends at line 50"),
    ({"--filter": "max-len=abc"}, "--filter 'max-len=abc'"),
    ({"--filter": "dedupe"}, "unknown filter 'dedupe'"),
    ({"--weights": "1,2"}, "--weights: 2 weights for 1"),
    ({"--weights": "one"}, "--weights 'one'"),
    ({"--train-src": "A,B"}, "--train-src names 2 files but --train-tgt 1"),
    ({"--valid-src": "MISSING"}, "MISSING: file not found (--valid-src)"),
    ({"--workers": "0"}, "--workers must be at least 1"),
])
def test_bad_prepare_input_is_one_line_exit_2_and_nothing_written(cli, number_files, tmp_path, capsys,
                                                                   change, named):
    short = tmp_path / "SHORT"
    short.write_text("".join(line + "\n" for line in
                             Path(number_files["train_tgt"]).read_text().splitlines()[:50]))
    args = prepare_flags(number_files, "--vocab-size", "60", "--no-byte-fallback", "--out",
                         str(tmp_path / "data"))
    for flag, value in change.items():
        value = {"SHORT": str(short), "MISSING": str(tmp_path / "MISSING")}.get(value, value)
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    capsys.readouterr()
    assert main(args) == 2
    assert named in cli.one_line_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["SHORT"]


@pytest.mark.slow
def test_two_gloo_ranks_train_from_one_prepared_directory(cli, data_dir, tmp_path):
    """The whole command under DDP: both ranks read the same memory maps and end together."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = tmp_path / "run"
    procs = []
    for rank in range(2):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "transformer", "train", "--data-dir", str(data_dir), *tiny(cli),
             "--max-steps", "3", "--eval-every", "3", "--log-every", "1", "--out", str(run)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    try:
        for p in procs:
            output, _ = p.communicate(timeout=300)
            assert p.returncode == 0, output.decode()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    steps = [r["step"] for r in records(run) if r["kind"] == "train"]
    assert steps == [1, 2, 3]
    assert json.loads((run / "config.json").read_text())["data"]["manifest_sha256"]
