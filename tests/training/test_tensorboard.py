"""TensorBoard events of a run, read back with TensorBoard's own reader (``EventAccumulator``):
the figures of ``metrics.jsonl`` (as float32, what TensorBoard stores), once per update, also
after a resume that redoes updates; written on rank 0 only. (The commands, and their stops:
tests/cli/test_tensorboard.py.)"""

from __future__ import annotations

import pytest
import torch

from transformer.training.metrics_file import MetricsLog
from transformer.training.optimizer import build_optimizer
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import LoopConfig, Trainer
from transformer.training.translation_task import TranslationTask

pytest.importorskip("tensorboard")

class Dies(TranslationTask):
    """A task that raises ``Died`` (as a SIGKILL would end the process) before the loss of update
    ``at``."""

    def __init__(self, at: int, **kwargs):
        super().__init__(**kwargs)
        self.at, self.calls = at, 0

    def loss(self, model, batch):
        self.calls += 1
        if self.calls == self.at:
            raise Died
        return super().loss(model, batch)


class Died(Exception):
    pass


def make(synth, run_dir, metrics, *, die_at=None, **cfg):
    """A trainer of 5 batches an epoch with dropout (the RNG matters), validated by loss."""
    pairs = synth.make_pairs(40, seed=3)
    batches = [synth.collate(pairs[i : i + 8]) for i in range(0, 40, 8)]
    valid = [synth.collate(synth.make_pairs(8, seed=4))]
    model = synth.tiny_model(dropout=0.2, seed=7)
    opt = build_optimizer(model)
    sched = build_scheduler(opt, schedule=LRSchedule(kind="inverse_sqrt", warmup=3, peak_lr=1e-2))
    task = (TranslationTask(valid_batches=valid) if die_at is None
            else Dies(die_at, valid_batches=valid))
    return Trainer(model=model, task=task, optimizer=opt, scheduler=sched,
                   train_data=synth.ListData(batches, seed=5),
                   config=LoopConfig(seed=11, log_every=1, **cfg), run_dir=run_dir,
                   metrics=metrics)


def test_the_events_hold_the_figures_of_metrics_jsonl(synth, tmp_path, tb_events):
    notes = {"precision": "precision fp32 (asked: fp32): as asked", "machine": "a CPU"}
    with MetricsLog(tmp_path, tensorboard=True, notes=notes) as metrics:
        make(synth, tmp_path, metrics, max_steps=6, eval_every=3).fit()
    scalars, texts = tb_events.read(tmp_path)
    assert scalars == tb_events.expected(tmp_path)
    assert {"train/loss", "train/lr", "train/tokens_per_s", "valid/loss"} <= set(scalars)
    assert [step for step, _ in scalars["train/loss"]] == [1, 2, 3, 4, 5, 6]
    assert texts == {f"run/{name}": text for name, text in notes.items()}


def test_a_resume_after_a_kill_purges_the_events_written_after_its_checkpoint(synth, tmp_path,
                                                                              tb_events):
    """Killed during update 8 (the last checkpoint: update 6), the events of update 7 are on disk;
    the resumed run writes update 7 again, and TensorBoard shows each update once, as the
    metrics file holds it."""
    with MetricsLog(tmp_path, tensorboard=True) as metrics, pytest.raises(Died):
        make(synth, tmp_path, metrics, die_at=8, max_steps=9, eval_every=3, save_every=5).fit()
    assert [step for step, _ in tb_events.read(tmp_path)[0]["train/loss"]] == list(range(1, 8))
    with MetricsLog(tmp_path, tensorboard=True) as metrics:
        make(synth, tmp_path, metrics, max_steps=9, eval_every=3, save_every=5).fit(resume=True)
    scalars, _ = tb_events.read(tmp_path)
    assert scalars == tb_events.expected(tmp_path)
    assert [step for step, _ in scalars["train/loss"]] == list(range(1, 10))
    assert [step for step, _ in scalars["valid/loss"]] == [3, 6, 9]


def test_only_rank_0_writes_events(monkeypatch, tmp_path):
    from transformer.precision import PrecisionChoice
    from transformer.training import distributed, stages

    precision = PrecisionChoice(requested="fp32", precision="fp32", reason="as asked")
    for rank, writes in ((0, True), (1, False)):
        info = distributed.DistInfo(rank=rank, world_size=2, local_rank=rank)
        monkeypatch.setattr(distributed, "current", lambda info=info: info)
        with stages.metrics_log(tmp_path, tensorboard=True, precision=precision) as metrics:
            assert metrics.tensorboard is writes
            assert ("machine" in metrics.notes) is writes


def test_without_tensorboard_there_are_no_events(synth, tmp_path):
    make(synth, tmp_path, None, max_steps=2, eval_every=1).fit()
    assert (tmp_path / "metrics.jsonl").is_file() and not (tmp_path / "tensorboard").exists()


def test_a_missing_package_is_one_line(monkeypatch, tmp_path):
    from transformer.errors import InputError

    monkeypatch.setitem(__import__("sys").modules, "torch.utils.tensorboard", None)
    with pytest.raises(InputError, match=r"^--tensorboard needs the tensorboard package: pip"):
        MetricsLog(tmp_path, tensorboard=True)
    assert list(tmp_path.iterdir()) == []
    torch.manual_seed(0)  # nothing else to undo


def test_a_new_event_file_sorts_after_the_existing_ones(tmp_path):
    """A resume in the same second as the stop, in a process of lower id (tests resume in the
    pytest process), made a file that TensorBoard's readers took first, so the curve ran 5..8
    then 1..4. The new file waits for the next second."""
    import time

    from transformer.training.tensorboard import TensorBoardWriter

    now = int(time.time())
    old = tmp_path / f"events.out.tfevents.{now}.zzz.999999.0"
    old.write_bytes(b"")
    writer = TensorBoardWriter(tmp_path)
    writer.close()
    names = sorted(p.name for p in tmp_path.glob("events.out.tfevents.*"))
    assert names[0] == old.name and len(names) == 2
    assert int(names[1].split(".")[3]) > now
