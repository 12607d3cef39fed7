"""Stopping on SIGTERM/SIGINT at an update boundary, periodic checkpoints and resuming from them
exactly, in one process (the command line and torchrun: tests/cli/test_reliability.py and
test_distributed.py)."""

from __future__ import annotations

import json
import logging
import os
import signal

import pytest
import torch

from helpers import assert_same
from transformer.errors import RunStopped
from transformer.training.checkpoint import load_checkpoint
from transformer.training.optimizer import build_optimizer
from transformer.training.preemption import SIGNALS, Preemption
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import LoopConfig, Trainer
from transformer.training.translation_task import TranslationTask

HANDLED = SIGNALS  # what Preemption turns into a stop (SIGTERM and SIGINT at least)


def handlers() -> dict[int, object]:
    return {signum: signal.getsignal(signum) for signum in HANDLED}


def assert_handlers(before: dict[int, object]) -> None:
    """Every handled signal's handler is the very one it was before the run."""
    now = handlers()
    for signum in HANDLED:
        assert now[signum] is before[signum], signal.Signals(signum).name


@pytest.fixture
def own_handlers():
    """Handlers of the test's own for SIGTERM and SIGINT (a run must leave them in place); the
    previous ones come back afterwards."""
    previous = handlers()

    def mine(signum, frame):  # pragma: no cover - a run must never let a signal reach it
        raise AssertionError(f"{signal.Signals(signum).name} reached the test's handler")

    for signum in HANDLED:
        signal.signal(signum, mine)
    yield handlers()
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.fixture
def keep_threads():
    """Put PyTorch's thread count back after a test that changes it."""
    threads = torch.get_num_threads()
    yield threads
    torch.set_num_threads(threads)


class Hooked(TranslationTask):
    """A translation task that calls ``hook(update, "train")`` before the loss of every
    micro-batch and ``hook(update, "valid")`` before evaluating the weights of ``update``."""

    def __init__(self, hook, *, accumulate: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.hook, self.accumulate, self.calls = hook, accumulate, 0

    def update(self) -> int:
        return (self.calls - 1) // self.accumulate + 1  # 1-based update of the latest micro-batch

    def loss(self, model, batch):
        self.calls += 1
        self.hook(self.update(), "train")
        return super().loss(model, batch)

    def evaluate(self, model):
        self.hook(self.update(), "valid")
        return super().evaluate(model)


def make(synth, run_dir, *, hook=None, seed=7, **cfg):
    """A trainer of 5 batches an epoch (5 updates, 3 with accumulate 2, 2 with 3), dropout on (the
    RNG matters) and validation by loss; ``hook`` as :class:`Hooked`'s."""
    pairs = synth.make_pairs(40, seed=3)
    batches = [synth.collate(pairs[i : i + 8]) for i in range(0, 40, 8)]
    valid = [synth.collate(synth.make_pairs(8, seed=4))]
    model = synth.tiny_model(dropout=0.2, seed=seed)
    opt = build_optimizer(model)
    sched = build_scheduler(opt, schedule=LRSchedule(kind="inverse_sqrt", warmup=3, peak_lr=1e-2))
    cfg.setdefault("log_every", 1)
    cfg.setdefault("eval_every", 0)
    task = (TranslationTask(valid_batches=valid) if hook is None else
            Hooked(hook, accumulate=cfg.get("accumulate", 1), valid_batches=valid))
    trainer = Trainer(model=model, task=task, optimizer=opt, scheduler=sched,
                      train_data=synth.ListData(batches, seed=5), config=LoopConfig(seed=11, **cfg),
                      run_dir=run_dir)
    return trainer, model


def records(path):
    """The metrics lines without their timings: what an exact resume repeats to the last bit."""
    timing = {"elapsed_s", "tokens_per_s", "eta_s"}
    return [{k: v for k, v in r.items() if k not in timing}
            for r in map(json.loads, path.read_text().splitlines())]


def steps(path):
    return [(r["kind"], r["step"]) for r in records(path)]


def assert_same_weights(a, b):
    for name, value in a.state_dict().items():
        assert torch.equal(value, b.state_dict()[name]), name


def assert_same_end(synth, straight, resumed):
    """The resumed run ends where the straight one does: weights, optimizer, schedule, counters,
    every generator's state, and the metrics lines (losses included) to the last bit."""
    a = load_checkpoint(straight, model=synth.tiny_model())
    b = load_checkpoint(resumed, model=synth.tiny_model())
    for key in ("optimizer", "scheduler", "rng"):
        assert_same(a[key], b[key], key)
    timing = {"elapsed_s", "eval_s"}
    assert_same({k: v for k, v in a["trainer"].items() if k not in timing},
                {k: v for k, v in b["trainer"].items() if k not in timing}, "trainer")
    assert records(resumed / "metrics.jsonl") == records(straight / "metrics.jsonl")


# (signal, exit status, accumulate, the update during which it arrives, "train" or "valid", the
# checkpoint's (epoch, batch) after it); eval_every 3
SIGNALLED = {
    "mid-epoch": (signal.SIGTERM, 143, 1, 2, "train", (0, 2)),
    "epoch boundary": (signal.SIGINT, 130, 1, 5, "train", (1, 0)),
    "mid-epoch, accumulating": (signal.SIGINT, 130, 2, 4, "train", (1, 2)),
    "epoch boundary, accumulating": (signal.SIGTERM, 143, 3, 4, "train", (2, 0)),
    "during validation": (signal.SIGTERM, 143, 1, 6, "valid", (1, 1)),
}


@pytest.mark.parametrize("where", list(SIGNALLED))
def test_a_signal_stops_after_the_update_with_a_checkpoint_and_resume_is_exact(
        synth, tmp_path, own_handlers, where):
    signum, status, accumulate, at, phase, position = SIGNALLED[where]
    n = 9

    def send(update, now):
        if (update, now) == (at, phase) and not sent:
            sent.append(update)
            os.kill(os.getpid(), signum)  # arrives during update ``at``'s forward pass (or its
            # validation): the handler only notes it

    sent: list[int] = []
    straight, straight_model = make(synth, tmp_path / "straight", max_steps=n, accumulate=accumulate,
                                    eval_every=3)
    straight.fit()
    trainer, _ = make(synth, tmp_path / "split", max_steps=n, accumulate=accumulate, eval_every=3,
                      hook=send)
    with pytest.raises(RunStopped) as stopped:
        trainer.fit()
    assert sent == [at]
    assert stopped.value.exit_status == status
    assert "\n" not in str(stopped.value) and str(tmp_path / "split" / "checkpoint") in str(stopped.value)
    assert_handlers(own_handlers)  # both handlers back, the stopped run's as any other's
    state = load_checkpoint(tmp_path / "split", model=synth.tiny_model())["trainer"]
    # the update that was running finished (and its validation), no more
    assert (state["step"], state["epoch"], state["batch_index"]) == (at, *position)
    assert trainer.state.step == at
    assert steps(tmp_path / "split" / "metrics.jsonl")[-1] == (phase, at)
    resumed, resumed_model = make(synth, tmp_path / "split", max_steps=n, accumulate=accumulate,
                                  eval_every=3)
    resumed.fit(resume=True)
    assert_handlers(own_handlers)
    assert_same_weights(straight_model, resumed_model)
    assert_same_end(synth, tmp_path / "straight", tmp_path / "split")


def test_handlers_are_restored_after_the_run(synth, tmp_path, own_handlers):
    assert {signal.SIGTERM, signal.SIGINT} <= set(HANDLED)
    trainer, _ = make(synth, tmp_path, max_steps=2, eval_every=1)
    trainer.fit()
    assert_handlers(own_handlers)
    resumed, _ = make(synth, tmp_path, max_steps=4, eval_every=1)
    resumed.fit(resume=True)
    assert_handlers(own_handlers)


def test_handlers_are_restored_when_the_run_fails(synth, tmp_path, own_handlers):
    def fail(update, phase):
        if update == 2:
            raise ZeroDivisionError

    trainer, _ = make(synth, tmp_path, max_steps=4, hook=fail)
    with pytest.raises(ZeroDivisionError):
        trainer.fit()
    assert_handlers(own_handlers)


def test_preemption_flag_outside_training():
    with Preemption() as p:
        assert p.requested() == 0
        os.kill(os.getpid(), signal.SIGTERM)
        assert p.requested() == signal.SIGTERM


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_second_signal_exits_at_once(monkeypatch, capsys, caplog, signum, status):
    exits = []
    monkeypatch.setattr(os, "_exit", exits.append)
    name = signal.Signals(signum).name
    with caplog.at_level(logging.WARNING, logger="transformer.training.preemption"), Preemption() as p:
        os.kill(os.getpid(), signum)
        assert p.requested() == signum and exits == []
        assert [r.getMessage() for r in caplog.records] == [
            f"{name} received: stopping after this update with a checkpoint (send it again to "
            "exit at once)"]
        os.kill(os.getpid(), signum)
        assert exits == [status]
    assert capsys.readouterr().err == (f"transformer: {name} again: exiting at once; the last "
                                       "complete checkpoint is kept\n")


# (the update during which the process dies, "train" or "valid", the update of the checkpoint it
# resumes from and that checkpoint's (epoch, batch)); eval_every 3 and save_every 5: checkpoints at
# updates 3, 5, 6, 9
KILLED = {
    "mid-epoch": (8, "train", 6, (1, 1)),
    "after an epoch boundary": (6, "train", 5, (1, 0)),
    "during validation": (6, "valid", 5, (1, 0)),
}


@pytest.mark.parametrize("where", list(KILLED))
def test_a_kill_between_checkpoints_resumes_from_the_last_one_exactly(
        synth, tmp_path, own_handlers, where):
    """A death (as a SIGKILL's) after the checkpoint of an earlier update: the resumed run drops
    the metrics lines written after that checkpoint, redoes those updates (and validations) and
    ends where a straight run ends."""
    at, phase, saved, position = KILLED[where]
    n = 9

    class Killed(Exception):
        pass

    def die(update, now):
        if (update, now) == (at, phase):
            raise Killed

    straight, straight_model = make(synth, tmp_path / "straight", max_steps=n, save_every=5,
                                    eval_every=3)
    straight.fit()
    trainer, _ = make(synth, tmp_path / "split", max_steps=n, save_every=5, eval_every=3, hook=die)
    with pytest.raises(Killed):
        trainer.fit()
    assert_handlers(own_handlers)
    # dead during the update ``at`` (its line not written) or during its validation (written)
    assert steps(tmp_path / "split" / "metrics.jsonl")[-1] == ("train", at if phase == "valid" else at - 1)
    state = load_checkpoint(tmp_path / "split", model=synth.tiny_model())["trainer"]
    assert (state["step"], state["epoch"], state["batch_index"]) == (saved, *position)
    resumed, resumed_model = make(synth, tmp_path / "split", max_steps=n, save_every=5, eval_every=3)
    resumed.fit(resume=True)
    assert_handlers(own_handlers)
    assert_same_weights(straight_model, resumed_model)
    assert_same_end(synth, tmp_path / "straight", tmp_path / "split")


def test_resume_runs_on_the_thread_count_the_run_started_with(synth, tmp_path, keep_threads, caplog):
    """PyTorch and MKL split their sums by thread, so another count rounds differently: the
    checkpoint records the count and a resume sets it back (a resume on a machine with more cores,
    without the first command's --threads, ended a few bits away from a straight run)."""
    torch.set_num_threads(1)
    trainer, _ = make(synth, tmp_path, max_steps=6, save_every=3)
    trainer.fit()
    state = load_checkpoint(tmp_path, model=synth.tiny_model())
    assert [machine["threads"] for machine in state["arithmetic"]] == [1]
    assert state["arithmetic"][0]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    torch.set_num_threads(2)
    resumed, _ = make(synth, tmp_path, max_steps=9)
    with caplog.at_level(logging.WARNING, logger="transformer.training.reproducibility"):
        resumed.fit(resume=True)
    assert torch.get_num_threads() == 1
    assert any("resuming with 1 CPU thread" in r.getMessage() for r in caplog.records)
    assert load_checkpoint(tmp_path, model=synth.tiny_model())["arithmetic"][0]["threads"] == 1


def test_resume_on_another_kind_of_machine_says_it_rounds_differently(synth, tmp_path, caplog):
    trainer, _ = make(synth, tmp_path, max_steps=3)
    trainer.fit()
    path = tmp_path / "checkpoint" / "state.pt"
    state = torch.load(path, weights_only=True)
    state["arithmetic"][0]["cpu_capability"] = "SOMETHING_ELSE"
    torch.save(state, path)
    resumed, _ = make(synth, tmp_path, max_steps=4)
    with caplog.at_level(logging.WARNING, logger="transformer.training.reproducibility"):
        resumed.fit(resume=True)
    lines = [r.getMessage() for r in caplog.records if "another kind of machine" in r.getMessage()]
    assert len(lines) == 1 and "SOMETHING_ELSE" in lines[0] and "not end bit for bit" in lines[0]


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
