"""``classify train --resume RUN_DIR`` and ``--resume auto``: a run stopped by SIGTERM and resumed
ends as an uninterrupted run, bit for bit (weights, optimizer, schedule, RNG, best model,
thresholds, metrics, results); what would change the run is refused in one line; ``--data-dir`` is
refused in one line saying why and what to do instead. Under torchrun: two gloo ranks."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from helpers import assert_same, logged_step, model_of, stop_with_sigterm
from transformer.cli import main
from transformer.training.checkpoint import load_checkpoint

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TIMING = {"elapsed_s", "tokens_per_s", "eta_s", "eval_s", "train_s", "total_s", "tokenizer_s"}


@pytest.fixture(autouse=True)
def _keep_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def classify_args(run: Path, *extra: str, train: Path = EXAMPLES / "topics-train.tsv") -> list[str]:
    """A multi-label run (thresholds tuned at each validation) of the tiny preset, logged and
    validated every 4 updates unless ``extra`` says otherwise."""
    return ["classify", "train", "--train", str(train), "--valid",
            str(EXAMPLES / "topics-valid.tsv"), "--multi-label", "--preset", "tiny",
            "--vocab-size", "300", "--precision", "fp32", "--threads", "1", "--no-progress",
            "--out", str(run), "--eval-every", "4", *extra]


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def end_state(run: Path) -> dict:
    """What an exact resume repeats to the last bit: the checkpoint (timings left out), the best
    model, config.json (thresholds, best validation), the metrics and results without timings."""
    state = load_checkpoint(run, model=model_of(run))
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {"weights": load_file(str(run / "checkpoint" / "model.safetensors")),
            "best": load_file(str(run / "model.safetensors")),
            "config": json.loads((run / "config.json").read_text()),
            "results": {k: v for k, v in _untimed(json.loads((run / "results.json").read_text()))
                        .items() if k != "run_dir"},
            "metrics": _untimed(metrics),
            **{key: _untimed(state[key]) for key in ("trainer", "optimizer", "scheduler", "rng")}}


# when the signal is sent (the run logs at each validation): after 8 updates, at validations every
# 4; or once the first checkpoint is written, at validations every 40: before the first validation
# has written the best model (the model directory is written at the start for this)
SIGTERMS = {"mid-run": ("4", lambda run: logged_step(run) >= 8),
            "before the first validation": ("40", lambda run: (run / "checkpoint").is_dir())}


@pytest.mark.parametrize("resume", ["RUN_DIR", "auto"])
@pytest.mark.parametrize("when", list(SIGTERMS))
def test_a_run_stopped_by_sigterm_and_resumed_ends_as_a_straight_run(tmp_path, when, resume):
    """Resumed by ``--resume RUN_DIR``, or by the same command again with ``--resume auto``."""
    eval_every, ready = SIGTERMS[when]
    args = ["--max-steps", "120", "--save-every", "1", "--eval-every", eval_every]
    straight, run = tmp_path / "straight", tmp_path / "run"
    command = classify_args(run, *args, *(["--resume", "auto"] if resume == "auto" else []))
    proc = subprocess.Popen([sys.executable, "-m", "transformer", *command],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    err = stop_with_sigterm(proc, lambda: ready(run), timeout=180)
    assert "SIGTERM" in err and "Traceback" not in err
    step = load_checkpoint(run, model=model_of(run))["trainer"]["step"]
    assert 0 < step < 120 and (step < 40 or when == "mid-run")
    if resume == "auto":
        assert main(command) == 0
    else:
        assert main(["classify", "train", "--resume", str(run), "--no-progress"]) == 0
    assert main(classify_args(straight, *args)) == 0
    assert_same(end_state(straight), end_state(run))


def test_a_finished_run_resumed_with_a_larger_budget_ends_as_one_run_of_it(tmp_path, capsys):
    straight, run = tmp_path / "straight", tmp_path / "run"
    assert main(classify_args(straight, "--max-steps", "12")) == 0
    assert main(classify_args(run, "--max-steps", "8")) == 0
    capsys.readouterr()
    assert main(["classify", "train", "--resume", str(run), "--max-steps", "12", "--json",
                 "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 12 and summary["run_dir"] == str(run)
    assert_same(end_state(straight), end_state(run))


def test_resume_auto_starts_then_continues_to_the_weights_of_a_straight_run(tmp_path, capsys):
    straight, auto = tmp_path / "straight", tmp_path / "auto"
    assert main(classify_args(straight, "--max-steps", "12")) == 0
    assert main(classify_args(auto, "--max-steps", "8", "--resume", "auto")) == 0
    first = (auto / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert main(classify_args(auto, "--max-steps", "12", "--resume", "auto", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 12
    assert (auto / "metrics.jsonl").read_text().startswith(first)  # resumed, not started again
    assert_same(end_state(straight), end_state(auto))
    # finished: the same command again changes nothing
    assert main(classify_args(auto, "--max-steps", "12", "--resume", "auto")) == 0
    assert_same(end_state(straight), end_state(auto))


def test_resume_auto_restarts_a_run_killed_before_its_first_checkpoint(tmp_path):
    straight, run = tmp_path / "straight", tmp_path / "run"
    assert main(classify_args(run, "--max-steps", "4")) == 0
    for name in ("checkpoint", "metrics.jsonl"):  # as if killed before the first checkpoint
        shutil.rmtree(run / name) if (run / name).is_dir() else (run / name).unlink()
    assert main(classify_args(straight, "--max-steps", "4")) == 0
    assert main(classify_args(run, "--max-steps", "4", "--resume", "auto")) == 0
    assert_same(end_state(straight), end_state(run))


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("flags, words", [
    (["--d-model", "48"], "model.d_model (stored 32, given 48)"),
    (["--seed", "3"], "seed (stored 0, given 3)"),
    (["--train", str(EXAMPLES / "topics-train.tsv")], "trained on other data: data.train (stored"),
    (["--split-seed", "7"], "trained on other data: data.recipe.seed (stored 1234, given 7)"),
    (["--single-label"], "multi_label (stored True, given False)"),
])
def test_resume_auto_refuses_another_configuration_or_other_data(
        cli, classifier_run, tmp_path, capsys, flags, words):
    """Anything but the budget that differs from the run's is refused naming it, the directory
    left as it was."""
    run = tmp_path / "run"
    shutil.copytree(classifier_run, run)
    before = _files(run)
    args = classify_args(run, "--max-steps", "8", "--resume", "auto",
                         train=classifier_run.parent / "train.tsv")
    if "--train" in flags:
        args[args.index("--train") + 1] = flags[1]
    elif "--single-label" in flags:
        args[args.index("--multi-label")] = "--single-label"
    else:
        args += flags
    capsys.readouterr()
    assert main(args) == 2
    line = cli.error_line(capsys)
    assert words in line and str(run / "config.json") in line
    assert _files(run) == before


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory) -> Path:
    """A finished run of 4 updates on a copy of the training file, kept as a template."""
    root = tmp_path_factory.mktemp("classifier")
    train = root / "train.tsv"
    shutil.copy(EXAMPLES / "topics-train.tsv", train)
    assert main(classify_args(root / "run", "--max-steps", "4", train=train)) == 0
    return root / "run"


@pytest.mark.parametrize("flags, words", [
    (["--d-model", "64"], "--d-model cannot change"),
    (["--train", "other.tsv"], "--train cannot change"),
    (["--text-column", "body"], "--text-column cannot change"),
    (["--config", "c.json"], "--config cannot change"),
])
def test_resume_refuses_what_would_change_the_run(cli, classifier_run, capsys, flags, words):
    assert main(["classify", "train", "--resume", str(classifier_run), *flags]) == 2
    assert words in cli.error_line(capsys)


def test_resume_refuses_changed_data_a_translation_run_and_a_missing_checkpoint(
        cli, classifier_run, trained_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(classifier_run, run)
    capsys.readouterr()
    train = classifier_run.parent / "train.tsv"
    original = train.read_text()
    try:
        train.write_text(original + "One more dog.\tperson\n")
        assert main(["classify", "train", "--resume", str(run), "--max-steps", "8"]) == 2
        line = cli.error_line(capsys)
        assert str(run / "config.json") in line and "has changed" in line
    finally:
        train.write_text(original)
    assert main(["classify", "train", "--resume", str(trained_run)]) == 2
    assert "not a classifier run that can be resumed" in cli.error_line(capsys)
    shutil.rmtree(run / "checkpoint")
    assert main(["classify", "train", "--resume", str(run)]) == 2
    assert "no checkpoint to resume from" in cli.error_line(capsys)


def test_data_dir_is_refused_in_one_line_saying_why(cli, tmp_path, capsys):
    run = tmp_path / "runs" / "new"
    assert main(["classify", "train", "--data-dir", str(tmp_path / "prepared"), "--out",
                 str(run)]) == 2
    line = cli.error_line(capsys)
    assert "parallel text" in line and "--train FILE" in line
    assert not run.parent.exists()


def _two_ranks(args: list[str]) -> list[str]:
    """``args`` as two gloo ranks of one job (what ``torchrun --nproc-per-node 2`` starts): each
    rank's stdout, both having exited 0."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, "-m", "transformer", *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-3000:]
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


def test_two_gloo_ranks_train_and_resume_auto_one_run(tmp_path):
    """classify train under torchrun: each rank trains on its shard of every epoch (half the
    batches of one process), rank 0 alone writes and reports, and the same command with a larger
    budget resumes the job where it stopped, every rank from its own random state."""
    run, single = tmp_path / "run", tmp_path / "single"
    assert main(classify_args(single, "--max-steps", "4")) == 0
    args = classify_args(run, "--max-steps", "4", "--resume", "auto", "--json")
    outs = _two_ranks(args)
    assert outs[1] == ""  # only rank 0 reports
    summary = json.loads(outs[0])
    assert summary["world_size"] == 2 and summary["steps"] == 4 and (run / "results.json").is_file()
    # an epoch of two ranks takes half the updates of one process's (rounded up: every rank
    # gets as many batches)
    batches = 4 / json.loads((single / "results.json").read_text())["epochs"]
    assert 4 / summary["epochs"] == pytest.approx(math.ceil(round(batches) / 2), abs=0.01)
    first = (run / "metrics.jsonl").read_text()
    summary = json.loads(_two_ranks(args[:args.index("--max-steps") + 1] + ["8"]
                                    + args[args.index("--max-steps") + 2:])[0])
    assert summary["steps"] == 8 and (run / "metrics.jsonl").read_text().startswith(first)
    state = torch.load(run / "checkpoint" / "state.pt", weights_only=True)
    assert state["trainer"]["step"] == 8 and len(state["rng"]) == 2
