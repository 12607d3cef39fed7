"""A non-finite loss or gradient skips the update (counted in metrics.jsonl); K in a row stop the
run with the last good checkpoint kept; fp16's grad scaler keeps its own skipping."""

from __future__ import annotations

import json
import math

import pytest
import torch

from transformer.errors import RunStopped
from transformer.training.checkpoint import load_checkpoint
from transformer.training.optimizer import build_optimizer
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import LoopConfig, Trainer
from transformer.training.translation_task import TranslationTask


class Poisoned(TranslationTask):
    """The translation loss, made non-finite on the updates in ``bad`` (1-based): the loss itself
    (``where="loss"``) or only the gradient of one weight (``where="grad"``)."""

    def __init__(self, bad, *, where="loss", value=math.nan):
        super().__init__()
        self.bad, self.where, self.value, self.update = set(bad), where, value, 0

    def loss(self, model, batch):
        self.update += 1
        loss = super().loss(model, batch)
        if self.update not in self.bad:
            return loss
        if self.where == "loss":
            return loss * self.value
        weight = next(model.parameters())
        weight.register_hook(lambda g: g * self.value)
        return loss


def make(synth, run_dir=None, *, task=None, schedule=None, **cfg):
    batches = [synth.collate(synth.make_pairs(6, seed=i)) for i in range(4)]
    model = synth.tiny_model(seed=1)
    cfg.setdefault("log_every", 1)
    cfg.setdefault("eval_every", 0)
    optimizer = build_optimizer(model)
    scheduler = None if schedule is None else build_scheduler(optimizer, schedule=schedule)
    trainer = Trainer(model=model, task=task or TranslationTask(), optimizer=optimizer,
                      scheduler=scheduler, train_data=synth.ListData(batches, shuffle=False),
                      config=LoopConfig(**cfg), run_dir=run_dir)
    return trainer, model


def records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(("where", "value"), [("loss", math.nan), ("loss", math.inf),
                                              ("grad", math.nan), ("grad", math.inf)])
@pytest.mark.parametrize("clip_norm", [1.0, None])
def test_a_non_finite_update_is_skipped_and_counted(synth, tmp_path, where, value, clip_norm):
    # update 3 is bad: the weights after 3 updates are those after 2 (Adam's state too), and
    # update 4 then trains on as a run that never saw update 3's batch would from there
    trainer, model = make(synth, tmp_path, max_steps=3, clip_norm=clip_norm,
                          task=Poisoned({3}, where=where, value=value))
    trainer.fit()
    reference, reference_model = make(synth, max_steps=2, clip_norm=clip_norm)
    reference.fit()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, reference_model.state_dict()[name]), name
    assert trainer.optimizer.state_dict()["state"][0]["step"] == 2
    out = records(tmp_path)
    assert [(r["step"], r["skipped_updates"]) for r in out if r["kind"] == "train"] == [
        (1, 0), (2, 0), (3, 1)]
    (skipped,) = [r for r in out if r["kind"] == "skipped"]
    assert skipped["step"] == 3 and skipped["in_a_row"] == 1
    assert all(math.isfinite(r["loss"]) for r in out if r["kind"] == "train")
    assert trainer.state.skipped_updates == 1


@pytest.mark.parametrize("kind", ["noam", "inverse_sqrt"])
def test_the_schedule_advances_over_a_skipped_update(synth, tmp_path, kind):
    """A skipped update still moves the learning rate on (as fp16's grad scaler does): after 5
    updates with the second skipped, every update's rate is the one a run without the bad update
    used at the same step, and the schedule stands at step 5 (updates 3-5 run at the rates of
    steps 3-5, not 2-4, during the warm-up where the rate changes most)."""
    schedule = LRSchedule(kind=kind, warmup=4, peak_lr=1e-2, d_model=32)
    bad, _ = make(synth, tmp_path / "bad", max_steps=5, schedule=schedule, task=Poisoned({2}))
    bad.fit()
    clean, _ = make(synth, tmp_path / "clean", max_steps=5, schedule=schedule)
    clean.fit()
    assert bad.state.skipped_updates == 1
    assert bad.scheduler.last_epoch == clean.scheduler.last_epoch == 5
    rates = [[(r["step"], r["lr"]) for r in records(run) if r["kind"] == "train"]
             for run in (tmp_path / "bad", tmp_path / "clean")]
    assert rates[0] == rates[1] and len(rates[0]) == 5
    assert len({lr for _, lr in rates[0]}) == 5  # the rate really changes at each step


def test_k_bad_updates_in_a_row_stop_the_run_and_keep_the_last_good_checkpoint(synth, tmp_path):
    trainer, model = make(synth, tmp_path, max_steps=20, save_every=2, max_bad_updates=3,
                          task=Poisoned({5, 6, 7, 8, 9}))
    with pytest.raises(RunStopped) as stopped:
        trainer.fit()
    message = str(stopped.value)
    assert stopped.value.exit_status == 1 and "\n" not in message
    assert "updates 5-7" in message and str(tmp_path / "checkpoint") in message
    fresh = synth.tiny_model(seed=1)
    state = load_checkpoint(tmp_path, model=fresh)
    assert state["trainer"]["step"] == 6  # written at update 6 with update 4's good weights
    reference, reference_model = make(synth, max_steps=4)
    reference.fit()
    for name, tensor in fresh.state_dict().items():
        assert torch.equal(tensor, reference_model.state_dict()[name]), name


def test_bad_updates_apart_never_stop_the_run(synth):
    trainer, _ = make(synth, max_steps=8, max_bad_updates=2, task=Poisoned({2, 4, 6}))
    result = trainer.fit()
    assert result.steps == 8 and trainer.state.skipped_updates == 3


def test_max_bad_updates_zero_never_stops(synth):
    trainer, _ = make(synth, max_steps=5, max_bad_updates=0, task=Poisoned({1, 2, 3, 4, 5}))
    assert trainer.fit().steps == 5 and trainer.state.skipped_updates == 5


def test_a_grad_scaler_keeps_its_own_skipping_and_is_not_counted_twice(synth):
    """fp16 runs on a GPU; its GradScaler is the same class on the CPU: a non-finite update
    lowers the scale and skips the step, and the trainer's own counter stays at 0."""
    trainer, model = make(synth, max_steps=3, task=Poisoned({2}))
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    trainer.fit()
    assert trainer.scaler.get_scale() == 2.0**9  # halved once, by the one bad update
    assert trainer.state.skipped_updates == 0
    assert all(torch.isfinite(p).all() for p in model.parameters())
