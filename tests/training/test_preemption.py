"""Stopping on SIGTERM/SIGINT at an update boundary, periodic checkpoints and resuming from them
exactly, in one process (the command line and torchrun: tests/cli/test_reliability.py and
test_distributed.py)."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

from transformer.errors import RunStopped
from transformer.training.checkpoint import load_checkpoint
from transformer.training.optimizer import build_optimizer
from transformer.training.preemption import Preemption
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import TrainConfig, Trainer
from transformer.training.translation_task import TranslationTask


class Hooked(TranslationTask):
    """A translation task that calls ``hook(update)`` before the loss of every micro-batch."""

    def __init__(self, hook, *, accumulate: int = 1):
        super().__init__()
        self.hook, self.accumulate, self.calls = hook, accumulate, 0

    def loss(self, model, batch):
        self.calls += 1
        self.hook((self.calls - 1) // self.accumulate + 1)  # 1-based update number
        return super().loss(model, batch)


def make(synth, run_dir, *, task=None, seed=7, **cfg):
    pairs = synth.make_pairs(40, seed=3)
    batches = [synth.collate(pairs[i : i + 8]) for i in range(0, 40, 8)]
    model = synth.tiny_model(dropout=0.2, seed=seed)
    opt = build_optimizer(model)
    sched = build_scheduler(opt, schedule=LRSchedule(kind="inverse_sqrt", warmup=3, peak_lr=1e-2))
    cfg.setdefault("log_every", 1)
    cfg.setdefault("eval_every", 0)
    trainer = Trainer(model=model, task=task or TranslationTask(), optimizer=opt, scheduler=sched,
                      train_data=synth.ListData(batches, seed=5), config=TrainConfig(seed=11, **cfg),
                      run_dir=run_dir)
    return trainer, model


def steps(path):
    return [(r["kind"], r["step"]) for r in map(json.loads, path.read_text().splitlines())]


def assert_same_weights(a, b):
    for name, value in a.state_dict().items():
        assert torch.equal(value, b.state_dict()[name]), name


@pytest.mark.parametrize(("signum", "status", "accumulate"),
                         [(signal.SIGTERM, 143, 1), (signal.SIGINT, 130, 2), (signal.SIGTERM, 143, 3)])
def test_a_signal_stops_after_the_update_with_a_checkpoint_and_resume_is_exact(
        synth, tmp_path, signum, status, accumulate):
    n, at = 9, 4

    def send(update):
        if update == at and not sent:
            sent.append(update)
            os.kill(os.getpid(), signum)  # arrives during update ``at``'s forward pass

    sent: list[int] = []
    straight, straight_model = make(synth, tmp_path / "straight", max_steps=n, accumulate=accumulate)
    straight.fit()
    trainer, _ = make(synth, tmp_path / "split", max_steps=n, accumulate=accumulate,
                      task=Hooked(send, accumulate=accumulate))
    with pytest.raises(RunStopped) as stopped:
        trainer.fit()
    assert stopped.value.exit_status == status
    assert "\n" not in str(stopped.value) and str(tmp_path / "split" / "checkpoint") in str(stopped.value)
    state = load_checkpoint(tmp_path / "split", model=synth.tiny_model())
    assert state["trainer"]["step"] == at  # the update that was running finished, no more
    assert signal.getsignal(signum) is not None and trainer.state.step == at
    resumed, resumed_model = make(synth, tmp_path / "split", max_steps=n, accumulate=accumulate)
    resumed.fit(resume=True)
    assert_same_weights(straight_model, resumed_model)
    assert steps(tmp_path / "split" / "metrics.jsonl") == steps(tmp_path / "straight" / "metrics.jsonl")


def test_handlers_are_restored_after_the_run(synth, tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    trainer, _ = make(synth, tmp_path, max_steps=2)
    trainer.fit()
    assert signal.getsignal(signal.SIGTERM) is before


def test_preemption_flag_outside_training():
    with Preemption() as p:
        assert p.requested() == 0
        os.kill(os.getpid(), signal.SIGTERM)
        assert p.requested() == signal.SIGTERM


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_second_signal_exits_at_once(monkeypatch, signum, status):
    exits = []
    monkeypatch.setattr(os, "_exit", exits.append)
    with Preemption() as p:
        os.kill(os.getpid(), signum)
        assert p.requested() == signum and exits == []
        os.kill(os.getpid(), signum)
        assert exits == [status]


def test_a_kill_between_checkpoints_resumes_from_the_last_one_exactly(synth, tmp_path):
    """A death at update 7 (as a SIGKILL would) after the checkpoint of update 5: the resumed run
    drops the metrics lines of update 6 and redoes it, and ends where a straight run ends."""
    n = 9

    class Killed(Exception):
        pass

    def die(update):
        if update == 7:
            raise Killed

    straight, straight_model = make(synth, tmp_path / "straight", max_steps=n, save_every=5)
    straight.fit()
    trainer, _ = make(synth, tmp_path / "split", max_steps=n, save_every=5, task=Hooked(die))
    with pytest.raises(Killed):
        trainer.fit()
    assert steps(tmp_path / "split" / "metrics.jsonl")[-1] == ("train", 6)
    assert load_checkpoint(tmp_path / "split", model=synth.tiny_model())["trainer"]["step"] == 5
    resumed, resumed_model = make(synth, tmp_path / "split", max_steps=n, save_every=5)
    resumed.fit(resume=True)
    assert_same_weights(straight_model, resumed_model)
    assert steps(tmp_path / "split" / "metrics.jsonl") == steps(tmp_path / "straight" / "metrics.jsonl")


@pytest.mark.parametrize(("cfg", "expected"), [
    ({"save_every": 3}, [3, 6, 7]),
    ({"save_every": 3, "eval_every": 2}, [2, 3, 4, 6, 7]),
    ({"save_minutes": 1e-9}, [1, 2, 3, 4, 5, 6, 7, 7]),  # and after the final evaluation
    ({}, [7]),
])
def test_periodic_checkpoints(synth, tmp_path, monkeypatch, cfg, expected):
    trainer, _ = make(synth, tmp_path, max_steps=7, **cfg)
    saved = []
    original = trainer._checkpoint
    monkeypatch.setattr(trainer, "_checkpoint", lambda: (saved.append(trainer.state.step), original()))
    trainer.fit()
    assert saved == expected
