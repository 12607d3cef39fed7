"""``transformer train`` when the machine misbehaves: SIGTERM, SIGKILL and a second signal,
``--resume auto`` (the same command to start and to restart), a resume on a machine with more
cores, two writers on one run directory, a failed checkpoint write. Each continues to the weights
of an uninterrupted run, bit for bit (on one kind of machine: another CPU kind rounds differently,
see transformer.training.reproducibility)."""

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

from helpers import assert_same, model_of
from transformer.cli import main
from transformer.training.checkpoint import CHECKPOINT_DIR, load_checkpoint
from transformer.training.run_lock import LOCK_FILE, read_holder


def weights(run: Path, name: str = "checkpoint/model.safetensors") -> dict[str, torch.Tensor]:
    return load_file(str(run / name))


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
    step = load_checkpoint(run, model=model_of(run))["trainer"]["step"]
    assert step == at_signal and step < n  # the checkpoint holds the last update logged
    assert main(args) == 0
    assert main(train_args(cli, number_files, straight, "--max-steps", str(n), eval_every=100)) == 0
    assert_same(weights(straight), weights(run))
    assert_same(weights(straight, "model.safetensors"), weights(run, "model.safetensors"))


# The runs the kills below are compared with: 60 updates of 6 an epoch, validations at 12, 24, ...
KILL_RUN = ("--max-steps", "60")
KILL_EVAL_EVERY = 12


@pytest.fixture(scope="module")
def straight_run(cli, number_files, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("straight") / "run"
    assert main(train_args(cli, number_files, run, *KILL_RUN, eval_every=KILL_EVAL_EVERY)) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records if r["step"] == 6] == [1.0]  # what the cases rely on
    return run


@pytest.fixture
def keep_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def end_state(run: Path) -> dict:
    """Everything a run ends with that an exact resume repeats to the last bit: the checkpoint's
    weights and state (timings left out), the best model, the metrics lines without timings."""
    state = load_checkpoint(run, model=model_of(run))
    for key in ("elapsed_s", "eval_s"):
        state["trainer"].pop(key)
    timing = {"elapsed_s", "tokens_per_s", "eta_s"}
    metrics = [{k: v for k, v in json.loads(line).items() if k not in timing}
               for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {"weights": weights(run), "best": weights(run, "model.safetensors"), "metrics": metrics,
            **{key: state[key] for key in ("trainer", "optimizer", "scheduler", "rng")}}


# signal, sent once this update is logged, --save-every, how the resume runs
KILLS = {
    # the checkpoint of the update under way, most likely mid-epoch
    "SIGTERM mid-run": (signal.SIGTERM, 3, 0, "in-process"),
    # every checkpoint (6, 12, 18, ...) ends an epoch: the resume starts at batch 0 of the next
    "SIGKILL after an epoch boundary": (signal.SIGKILL, 8, 6, "in-process"),
    # the validation of update 12 runs once its line is logged: back to the checkpoint of 10
    # (or, where the kill comes later, 12 or 15); the resume is a new process, as users run it
    "SIGKILL during validation": (signal.SIGKILL, 12, 5, "subprocess"),
}


@pytest.mark.parametrize("case", list(KILLS))
def test_a_killed_run_resumed_on_more_threads_ends_as_a_straight_run(
        cli, number_files, straight_run, tmp_path, keep_threads, case):
    """Killed through the command line, then ``train --resume RUN`` without the first command's
    ``--threads 1`` where PyTorch would take 2 (a machine with more cores): the resume runs on the
    run's own thread count and ends with everything equal to the straight run's, to the last bit."""
    signum, after, save_every, resume_in = KILLS[case]
    run = tmp_path / "run"
    proc = start(train_args(cli, number_files, run, *KILL_RUN, "--save-every", str(save_every),
                            eval_every=KILL_EVAL_EVERY))
    wait_for(lambda: logged_step(run) >= after, proc)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (143 if signum == signal.SIGTERM else -signal.SIGKILL), err[-2000:]
    state = load_checkpoint(run, model=model_of(run))["trainer"]
    assert 0 < state["step"] < 60
    if signum == signal.SIGTERM:
        assert state["step"] == logged_step(run)  # the update under way, checkpointed
    if save_every == 6:
        assert state["batch_index"] == 0 and state["epoch"] == state["step"] // 6
    resume = ["train", "--resume", str(run), "--no-progress"]
    if resume_in == "subprocess":
        done = subprocess.run([sys.executable, "-m", "transformer", *resume],
                              env={**os.environ, "OMP_NUM_THREADS": "2"}, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "resuming with 1 CPU thread" in done.stderr
    else:
        torch.set_num_threads(2)
        assert main(resume) == 0
        assert torch.get_num_threads() == 1
    assert load_checkpoint(run, model=model_of(run))["arithmetic"][0]["threads"] == 1
    assert_same(end_state(straight_run), end_state(run))


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
    assert load_checkpoint(run, model=model_of(run))["trainer"]["step"] >= 2


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
    assert load_checkpoint(run, model=model_of(run))["trainer"]["step"] == 4
    assert not (run / "checkpoint.tmp").exists()


@pytest.mark.parametrize("command", [
    ["train", "--resume", "{run}"],
    ["train", "--train-src", "{missing}", "--train-tgt", "{missing}", "--out", "{run}"],
    ["train", "--train-src", "{missing}", "--train-tgt", "{missing}", "--out", "{run}",
     "--resume", "auto"],
    ["classify", "train", "--train", "{missing}", "--out", "{run}"],
], ids=["resume-typo", "missing-data", "resume-auto", "classify"])
def test_bad_input_leaves_no_run_directory_behind(command, cli, tmp_path, capsys):
    run, missing = tmp_path / "runs" / "new", tmp_path / "missing.txt"
    args = [a.format(run=run, missing=missing) for a in command]
    assert main([*args, "--threads", "1", "--no-progress"]) == 2
    assert str(run if args[1] == "--resume" else missing) in cli.error_line(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("verb", [["demo", "--max-steps", "1"]])
def test_demo_takes_the_lock_too(verb, tmp_path, capsys):
    from transformer.training.run_lock import RunLock

    run = tmp_path / "demo"
    with RunLock(run):
        assert main([*verb, "--out", str(run), "--no-progress"]) == 2
    assert f"process {os.getpid()} " in capsys.readouterr().err


def test_a_fine_tuned_run_resumed_ends_as_a_straight_one(cli, number_files, trained_run, tmp_path):
    """``train --init-from``, stopped after 4 updates and continued with ``--resume`` to 8: the same
    end state as 8 updates in one go (weights, optimizer, schedule, RNG, best model, metrics)."""
    def fine_tune(run: Path, steps: str) -> list[str]:
        args = train_args(cli, number_files, run, "--init-from", str(trained_run), "--max-steps",
                          steps)
        shape = args.index("--preset")  # the shape and tokenizer flags are the origin's
        return [*args[:shape], *args[args.index("--max-tokens"):]]

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(fine_tune(straight, "8")) == 0
    assert main(fine_tune(resumed, "4")) == 0
    assert main(["train", "--resume", str(resumed), "--max-steps", "8", "--no-progress"]) == 0
    ends = [end_state(resumed), end_state(straight)]
    for end in ends:  # the planned total is the budget each command gave (no cool-down uses it)
        end["scheduler"]["lr_lambdas"][0].pop("total")
    assert_same(*ends)
    assert json.loads((resumed / "config.json").read_text())["init_from"]["path"] == str(
        trained_run.resolve())
