"""``train --tensorboard`` and ``classify train --tensorboard``: event files that TensorBoard's own
reader (``EventAccumulator``) reads back with the values of ``metrics.jsonl``, the precision and
the machine as text; complete after a SIGTERM, a diverged run and a resume; one line when the
package is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import logged_step, stop_with_sigterm
from transformer.cli import main

pytest.importorskip("tensorboard")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
def train_args(cli, number_files, run: Path, *extra: str) -> list[str]:
    return ["train", *cli.data_flags(number_files), *cli.TINY, "--log-every", "1", "--out",
            str(run), "--tensorboard", *extra]


def test_train_writes_the_figures_of_metrics_jsonl_and_the_run_as_text(cli, number_files, tmp_path,
                                                                       tb_events):
    from transformer.hardware import detect

    run = tmp_path / "run"
    assert main(train_args(cli, number_files, run, "--max-steps", "6", "--eval-every", "2",
                           "--average-last", "2")) == 0
    scalars, texts = tb_events.read(run)
    assert scalars == tb_events.expected(run)
    assert {"train/loss", "train/lr", "train/tokens_per_s", "valid/loss", "valid/bleu",
            "valid/chrf", "average/loss"} <= set(scalars)
    precision = json.loads((run / "config.json").read_text())["precision"]
    assert texts["run/precision"].startswith(f"precision {precision['precision']} ")
    assert texts["run/machine"] == detect().summary()


def test_classify_train_writes_the_figures_of_metrics_jsonl(tmp_path, tb_events):
    run = tmp_path / "topics"
    assert main(["classify", "train", "--train", str(EXAMPLES / "topics-train.tsv"), "--valid",
                 str(EXAMPLES / "topics-valid.tsv"), "--multi-label", "--preset", "tiny",
                 "--vocab-size", "300", "--max-steps", "8", "--eval-every", "4",
                 "--precision", "fp32", "--threads", "1", "--no-progress", "--out", str(run),
                 "--tensorboard"]) == 0
    scalars, _ = tb_events.read(run)
    assert scalars == tb_events.expected(run)
    assert {"train/loss", "valid/macro_f1", "valid/accuracy", "valid/macro_f1_at_0.5"} <= set(scalars)


def test_the_events_are_complete_after_a_sigterm_and_a_resume_continues_them(cli, number_files,
                                                                             tmp_path, tb_events):
    run = tmp_path / "run"
    args = train_args(cli, number_files, run, "--max-steps", "300", "--eval-every", "100")
    proc = subprocess.Popen([sys.executable, "-m", "transformer", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    stop_with_sigterm(proc, lambda: logged_step(run) >= 3, timeout=120)
    stopped_at = logged_step(run)
    scalars, _ = tb_events.read(run)
    assert scalars == tb_events.expected(run)  # closed on the way out: every update's events
    assert scalars["train/loss"][-1][0] == stopped_at
    assert main(["train", "--resume", str(run), "--max-steps", str(stopped_at + 4),
                 "--no-progress"]) == 0
    scalars, _ = tb_events.read(run)
    assert scalars == tb_events.expected(run)
    assert [step for step, _ in scalars["train/loss"]] == list(range(1, stopped_at + 5))


def test_a_diverged_run_closes_its_event_files(cli, number_files, tmp_path, monkeypatch, capsys,
                                               tb_events):
    from transformer.training import tensorboard
    from transformer.training.translation_task import TranslationTask

    closed = []
    real_close = tensorboard.TensorBoardWriter.close
    monkeypatch.setattr(tensorboard.TensorBoardWriter, "close",
                        lambda self: (closed.append(True), real_close(self)))
    real_loss = TranslationTask.loss
    calls = []

    def diverging(self, model, batch):
        calls.append(1)
        loss = real_loss(self, model, batch)
        return loss * float("nan") if len(calls) > 3 else loss

    monkeypatch.setattr(TranslationTask, "loss", diverging)
    run = tmp_path / "run"
    assert main(train_args(cli, number_files, run, "--max-steps", "20", "--eval-every", "10",
                           "--max-bad-updates", "2")) == 1
    assert "2 updates in a row" in capsys.readouterr().err
    assert closed == [True]
    scalars, _ = tb_events.read(run)
    assert scalars == tb_events.expected(run) and len(scalars["train/loss"]) == 4


@pytest.mark.parametrize("verb", [["train", "--train-src", "{f}", "--train-tgt", "{f}"],
                                  ["classify", "train", "--train", "{f}"]])
def test_a_missing_tensorboard_package_is_one_line_before_any_work(
        verb, cli, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    data = cli.write(tmp_path / "data.tsv", ["text\tlabel", "a\tx", "b\ty"])
    run = tmp_path / "runs" / "new"
    args = [a.format(f=data) for a in verb]
    assert main([*args, "--tensorboard", "--out", str(run), "--threads", "1",
                 "--no-progress"]) == 2
    line = cli.error_line(capsys)
    assert "--tensorboard needs the tensorboard package" in line and "pip install" in line
    assert not (tmp_path / "runs").exists()


def test_resume_may_turn_tensorboard_on(cli, trained_run, tmp_path, tb_events):
    """A run started without it writes the updates it makes after the resume."""
    run = cli.copy_run(trained_run, tmp_path)
    assert not (run / "tensorboard").exists()
    assert main(["train", "--resume", str(run), "--max-steps", "6", "--tensorboard",
                 "--no-progress"]) == 0
    scalars, _ = tb_events.read(run)
    curves = tb_events.expected(run)
    assert scalars["train/loss"] == curves["train/loss"][4:] and len(curves["train/loss"]) == 6
