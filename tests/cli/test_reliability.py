"""``transformer train`` when the machine misbehaves: SIGTERM and a second signal, ``--resume
auto`` (the same command to start and to restart), two writers on one run directory, a failed
checkpoint write. Each continues to the weights of an uninterrupted run, bit for bit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from transformer.cli import main
from transformer.training.checkpoint import CHECKPOINT_DIR, load_checkpoint
from transformer.training.run_lock import LOCK_FILE, read_holder


def weights(run: Path, name: str = "checkpoint/model.safetensors") -> dict[str, torch.Tensor]:
    return load_file(str(run / name))


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def train_args(cli, number_files, run: Path, *extra: str, eval_every: int = 4) -> list[str]:
    return ["train", *cli.data_flags(number_files), *cli.TINY, "--eval-every", str(eval_every),
            "--log-every", "1", "--out", str(run), *extra]


def logged_step(run: Path) -> int:
    path = run / "metrics.jsonl"
    if not path.is_file():
        return 0
    steps = [0]
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError, KeyError):  # a line being written
            steps.append(json.loads(line)["step"])
    return max(steps)


def start(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "transformer", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_resume_auto_starts_then_continues_to_the_weights_of_a_straight_run(
        cli, number_files, tmp_path, capsys):
    straight, auto = tmp_path / "straight", tmp_path / "auto"
    assert main(train_args(cli, number_files, straight, "--max-steps", "8")) == 0
    assert main(train_args(cli, number_files, auto, "--max-steps", "4", "--resume", "auto")) == 0
    first = (auto / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert main(train_args(cli, number_files, auto, "--max-steps", "8", "--resume", "auto",
                           "--json")) == 0
    summary = cli.json_out(capsys)
    assert summary["steps"] == 8
    assert (auto / "metrics.jsonl").read_text().startswith(first)  # resumed, not started again
    assert_same(weights(straight), weights(auto))
    assert_same(weights(straight, "model.safetensors"), weights(auto, "model.safetensors"))
    # finished: the same command again changes nothing
    assert main(train_args(cli, number_files, auto, "--max-steps", "8", "--resume", "auto")) == 0
    assert_same(weights(straight), weights(auto))


def test_resume_auto_refuses_another_configuration(cli, trained_run, number_files, tmp_path, capsys):
    run = cli.copy_run(trained_run, tmp_path)
    capsys.readouterr()
    assert main(["train", *cli.data_flags(number_files), *cli.TINY, "--d-model", "32",
                 "--max-steps", "4", "--eval-every", "2", "--log-every", "1", "--out", str(run),
                 "--resume", "auto"]) == 2
    line = cli.error_line(capsys)
    assert "model.d_model" in line and str(run / "config.json") in line


def test_resume_auto_restarts_a_run_killed_before_its_first_checkpoint(
        cli, number_files, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(train_args(cli, number_files, run, "--max-steps", "2")) == 0
    for name in (CHECKPOINT_DIR, "metrics.jsonl"):  # as if killed before the first checkpoint
        path = run / name
        subprocess.run(["rm", "-rf", str(path)], check=True)
    straight = tmp_path / "straight"
    assert main(train_args(cli, number_files, straight, "--max-steps", "2")) == 0
    assert main(train_args(cli, number_files, run, "--max-steps", "2", "--resume", "auto")) == 0
    assert_same(weights(straight), weights(run))


def test_sigterm_checkpoints_the_update_under_way_and_resume_auto_is_exact(
        cli, number_files, tmp_path):
    n = 300
    straight, run = tmp_path / "straight", tmp_path / "run"
    args = train_args(cli, number_files, run, "--max-steps", str(n), "--resume", "auto",
                      eval_every=100)
    proc = start(args)
    wait_for(lambda: logged_step(run) >= 3, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    at_signal = logged_step(run)
    assert proc.returncode == 143, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("transformer:")]
    assert len(lines) == 1 and "SIGTERM" in lines[0] and "Traceback" not in err
    step = load_checkpoint(run, model=_model(run))["trainer"]["step"]
    assert step == at_signal and step < n  # the checkpoint holds the last update logged
    assert main(args) == 0
    assert main(train_args(cli, number_files, straight, "--max-steps", str(n), eval_every=100)) == 0
    assert_same(weights(straight), weights(run))
    assert_same(weights(straight, "model.safetensors"), weights(run, "model.safetensors"))


def test_a_second_signal_exits_at_once_leaving_a_loadable_directory(cli, number_files, tmp_path):
    run = tmp_path / "run"
    proc = start(train_args(cli, number_files, run, "--max-steps", "100000", "--save-every", "1"))
    wait_for(lambda: logged_step(run) >= 3, proc)
    proc.send_signal(signal.SIGTERM)
    seen = []
    for line in proc.stderr:  # signals do not queue: the second must follow the first's handler
        seen.append(line)
        if "SIGTERM received" in line:
            proc.send_signal(signal.SIGTERM)
            break
    _, err = proc.communicate(timeout=120)
    err = "".join(seen) + err
    # mostly "again: exiting at once"; when the checkpoint was quicker than the second signal,
    # the first one's orderly stop: either way 143 and a loadable checkpoint
    assert proc.returncode == 143 and "Traceback" not in err
    assert load_checkpoint(run, model=_model(run))["trainer"]["step"] >= 2


def test_a_second_writer_is_refused_naming_the_first(cli, number_files, tmp_path, capsys):
    run = tmp_path / "run"
    proc = start(train_args(cli, number_files, run, "--max-steps", "100000"))
    try:
        wait_for(lambda: logged_step(run) >= 1, proc)
        assert read_holder(run / LOCK_FILE)[0] == proc.pid
        capsys.readouterr()
        for second in (train_args(cli, number_files, run, "--max-steps", "2", "--overwrite"),
                       ["train", "--resume", str(run), "--max-steps", "5"],
                       train_args(cli, number_files, run, "--max-steps", "5", "--resume", "auto")):
            assert main(second) == 2
            assert f"process {proc.pid} " in cli.error_line(capsys)
        assert proc.poll() is None  # the first run goes on untouched
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    assert proc.returncode == 143
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == list(range(1, logged_step(run) + 1))


def test_a_failed_checkpoint_write_is_one_line_and_keeps_the_previous_checkpoint(
        cli, trained_run, tmp_path, capsys, monkeypatch):
    run = cli.copy_run(trained_run, tmp_path)
    before = weights(run)

    def full_disk(obj, f, *args, **kwargs):
        raise OSError(28, "No space left on device", str(f))

    monkeypatch.setattr(torch, "save", full_disk)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--max-steps", "6", "--no-progress"]) == 1
    line = cli.error_line(capsys)
    assert str(run / CHECKPOINT_DIR) in line and "No space left on device" in line
    monkeypatch.undo()
    assert_same(before, weights(run))
    assert load_checkpoint(run, model=_model(run))["trainer"]["step"] == 4
    assert not (run / "checkpoint.tmp").exists()


def _model(run: Path):
    from transformer.model_dir import build_model, read_config

    return build_model(read_config(run))


@pytest.mark.parametrize("verb", [["demo", "--max-steps", "1"]])
def test_demo_takes_the_lock_too(verb, tmp_path, capsys):
    from transformer.training.run_lock import RunLock

    run = tmp_path / "demo"
    with RunLock(run):
        assert main([*verb, "--out", str(run), "--no-progress"]) == 2
    assert f"process {os.getpid()} " in capsys.readouterr().err
