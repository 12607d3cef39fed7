"""The training loop: accumulation, exact resume, stop conditions, metrics, best model."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

from transformer.errors import RunStopped
from transformer.training.checkpoint import load_checkpoint
from transformer.training.optimizer import build_optimizer
from transformer.training.schedule import LRSchedule, build_scheduler
from transformer.training.trainer import LoopConfig, Trainer
from transformer.training.translation_task import TranslationTask


def make_trainer(synth, *, data, model=None, optimizer=None, scheduler=True, run_dir=None,
                 task=None, dropout=0.0, **cfg):
    model = model if model is not None else synth.tiny_model(dropout=dropout)
    optimizer = optimizer if optimizer is not None else build_optimizer(model)
    sched = None
    if scheduler:
        sched = build_scheduler(optimizer, schedule=LRSchedule(kind="inverse_sqrt", warmup=3,
                                                               peak_lr=1e-2))
    cfg.setdefault("log_every", 1)
    cfg.setdefault("eval_every", 0)
    return Trainer(model=model, task=task or TranslationTask(), optimizer=optimizer,
                   scheduler=sched, train_data=data, config=LoopConfig(**cfg), run_dir=run_dir)


def params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("k", [2, 3])
def test_accumulating_k_micro_batches_equals_one_batch_k_times_larger(synth, k):
    pairs = synth.make_pairs(6 * k, seed=1)
    micro = [synth.collate(pairs[i : i + 6]) for i in range(0, len(pairs), 6)]
    whole = [synth.collate(pairs)]
    results = []
    for batches, accumulate in ((micro, k), (whole, 1)):
        model = synth.tiny_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)  # Adam's first step is sign-like: too touchy
        trainer = make_trainer(synth, data=synth.ListData(batches, shuffle=False), model=model,
                               optimizer=opt, scheduler=False, accumulate=accumulate, max_steps=2,
                               clip_norm=None)
        trainer.fit()
        results.append(params(model))
    for name in results[0]:
        torch.testing.assert_close(results[0][name], results[1][name], atol=1e-5, rtol=1e-5)


def test_a_tiny_model_learns_to_reverse(synth):
    pairs = synth.make_pairs(256, seed=0, max_len=5)
    batches = [synth.collate(pairs[i : i + 32]) for i in range(0, 256, 32)]
    model = synth.tiny_model()
    trainer = make_trainer(synth, data=synth.ListData(batches), model=model, epochs=3)
    losses = []
    trainer._log_train_orig = trainer._log_train

    def capture(window, n):
        losses.append(window["loss"] / window["norm"])
        trainer._log_train_orig(window, n)

    trainer._log_train = capture
    result = trainer.fit()
    assert result.stopped_by == "epochs" and result.steps == 24
    assert sum(losses[-4:]) / 4 < 0.8 * sum(losses[:4]) / 4


@pytest.mark.parametrize("accumulate", [1, 2])
def test_resume_continues_exactly(synth, tmp_path, accumulate):
    """N updates straight == N/2 updates, stop, resume, N/2 more (dropout on: RNG state matters)."""
    pairs = synth.make_pairs(40, seed=3)
    batches = [synth.collate(pairs[i : i + 8]) for i in range(0, 40, 8)]  # 5 batches per epoch
    n = 8

    def run(run_dir, max_steps, resume=False):
        model = synth.tiny_model(dropout=0.2, seed=7)
        trainer = make_trainer(synth, data=synth.ListData(batches, seed=5), model=model,
                               run_dir=run_dir, max_steps=max_steps, accumulate=accumulate,
                               eval_every=3, seed=11)
        trainer.fit(resume=resume)
        return model

    straight = run(tmp_path / "straight", n)
    run(tmp_path / "split", n // 2)
    resumed = run(tmp_path / "split", n, resume=True)
    for name, value in straight.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[name]), name
    # the metrics of the split run are those of the straight run, step for step
    def steps(path):
        return [(r["kind"], r["step"]) for r in map(json.loads, path.read_text().splitlines())]
    assert steps(tmp_path / "split" / "metrics.jsonl") == steps(tmp_path / "straight" / "metrics.jsonl")


def test_checkpoint_holds_the_data_position(synth, tmp_path):
    batches = [synth.collate(synth.make_pairs(4, seed=i)) for i in range(5)]
    trainer = make_trainer(synth, data=synth.ListData(batches), run_dir=tmp_path, max_steps=7)
    trainer.fit()
    state = load_checkpoint(tmp_path, model=synth.tiny_model())
    assert state["trainer"]["step"] == 7
    assert (state["trainer"]["epoch"], state["trainer"]["batch_index"]) == (1, 2)
    assert state["scheduler"]["last_epoch"] == 7


def test_metrics_jsonl_has_every_logged_step_and_evaluation(synth, tmp_path):
    pairs = synth.make_pairs(24, seed=2)
    batches = [synth.collate(pairs[i : i + 6]) for i in range(0, 24, 6)]
    task = TranslationTask(valid_batches=batches[:1])
    trainer = make_trainer(synth, data=synth.ListData(batches), run_dir=tmp_path, task=task,
                           max_steps=6, log_every=2, eval_every=3)
    trainer.fit()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    valid = [r for r in records if r["kind"] == "valid"]
    assert [r["step"] for r in train] == [2, 4, 6]
    assert [r["step"] for r in valid] == [3, 6]
    for r in train:
        assert {"kind", "step", "epoch", "loss", "lr", "tokens_per_s", "elapsed_s"} <= set(r)
    for r in valid:
        assert {"kind", "step", "epoch", "loss"} <= set(r)


class ConstantTask(TranslationTask):
    """A validation metric that never improves after the first evaluation."""

    def __init__(self):
        super().__init__()
        self.metric = "accuracy"

    def evaluate(self, model):
        return {"loss": 1.0, "accuracy": 0.5}


def test_early_stopping_after_patience_evaluations_without_improvement(synth):
    batches = [synth.collate(synth.make_pairs(4, seed=i)) for i in range(3)]
    saved = []
    trainer = make_trainer(synth, data=synth.ListData(batches), task=ConstantTask(),
                           max_steps=100, eval_every=2, patience=3)
    trainer.save_best = lambda model, result: saved.append(result)
    result = trainer.fit()
    assert result.stopped_by == "patience"
    assert result.steps == 8  # first evaluation sets the best, three more fail to beat it
    assert result.best_step == 2 and len(saved) == 1


def test_stops_on_epochs_and_minutes(synth):
    batches = [synth.collate(synth.make_pairs(4, seed=i)) for i in range(3)]
    result = make_trainer(synth, data=synth.ListData(batches), epochs=2, accumulate=2).fit()
    assert (result.stopped_by, result.steps) == ("epochs", 4)  # 2 updates of 2 + 1 micro-batches
    result = make_trainer(synth, data=synth.ListData(batches), minutes=1e-6).fit()
    assert result.stopped_by == "minutes" and result.steps <= 1


def test_best_model_follows_the_metric(synth):
    batches = [synth.collate(synth.make_pairs(4, seed=i)) for i in range(3)]

    class Improving(TranslationTask):
        calls = 0

        def __init__(self):
            super().__init__()
            self.metric = "f1"

        def evaluate(self, model):
            self.calls += 1
            return {"loss": 0.0, "f1": [0.2, 0.5, 0.4, 0.6][self.calls - 1]}

    saved = []
    trainer = make_trainer(synth, data=synth.ListData(batches), task=Improving(), max_steps=4,
                           eval_every=1)
    trainer.save_best = lambda model, result: saved.append(result["f1"])
    result = trainer.fit()
    assert saved == [0.2, 0.5, 0.6] and result.best_metric == 0.6 and result.best_step == 4


def test_bf16_autocast_trains_on_cpu(synth):
    batches = [synth.collate(synth.make_pairs(8, seed=i)) for i in range(2)]
    model = synth.tiny_model()
    before = params(model)
    result = make_trainer(synth, data=synth.ListData(batches), model=model, max_steps=2,
                          precision="bf16").fit()
    assert result.steps == 2
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_fp16_needs_a_gpu(synth):
    with pytest.raises(ValueError, match="fp16"):
        make_trainer(synth, data=synth.ListData([]), max_steps=1, precision="fp16", )


@pytest.mark.parametrize("kwargs", [{}, {"max_steps": 0}, {"max_steps": 1, "accumulate": 0},
                                    {"max_steps": 1, "precision": "fp8"}])
def test_bad_train_config(kwargs):
    with pytest.raises(ValueError):
        LoopConfig(**kwargs)


def test_progress_bar_on_a_terminal(synth, capsys):
    batches = [synth.collate(synth.make_pairs(4, seed=i)) for i in range(2)]
    trainer = make_trainer(synth, data=synth.ListData(batches), max_steps=3)
    trainer.progress = True
    assert trainer.fit().steps == 3
    err = capsys.readouterr().err
    assert "3/3" in err and "loss=" in err and "tok_s=" in err and "epoch=" in err


def test_validation_loss_selects_the_best_model_without_bleu(synth):
    batches = [synth.collate(synth.make_pairs(8, seed=i)) for i in range(3)]
    saved = []
    trainer = make_trainer(synth, data=synth.ListData(batches), max_steps=6, eval_every=2,
                           task=TranslationTask(valid_batches=batches[:1]))
    trainer.save_best = lambda model, result: saved.append(result["loss"])
    result = trainer.fit()
    assert saved and saved == sorted(saved, reverse=True) and result.best_metric == saved[-1]


class Clock:
    """A machine's clock as a function of the work done: ``per_update`` seconds a micro-batch,
    ``per_eval`` seconds an evaluation (reading it costs nothing), so runs can be replayed."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class TimedTask(TranslationTask):
    def __init__(self, clock, *, per_update, per_eval=0.0, valid_batches=()):
        super().__init__(valid_batches=list(valid_batches))
        self.clock, self.per_update, self.per_eval = clock, per_update, per_eval

    def loss(self, model, batch):
        self.clock.now += self.per_update
        return super().loss(model, batch)

    def evaluate(self, model):
        self.clock.now += self.per_eval
        return super().evaluate(model)


def recorded_rates(trainer) -> list[float]:
    """A list that fills, as ``trainer`` trains, with the learning rate each update used."""
    rates = []
    step = trainer._step_schedule

    def record(n):
        rates.append(trainer._lr())  # the rate the update just made used
        step(n)

    trainer._step_schedule = record
    return rates


def timed_trainer(synth, *, per_update, per_eval=0.0, share=0.5, run_dir=None, seed=7, **cfg):
    clock = Clock()
    batches = [synth.collate(synth.make_pairs(4, seed=i)) for i in range(4)]
    model = synth.tiny_model(dropout=0.2, seed=seed)
    optimizer = build_optimizer(model)
    sched = build_scheduler(optimizer, schedule=LRSchedule(kind="constant", peak_lr=1e-3,
                                                           cooldown_share=share))
    task = TimedTask(clock, per_update=per_update, per_eval=per_eval, valid_batches=batches[:1])
    cfg.setdefault("eval_every", 0)
    trainer = Trainer(model=model, task=task, optimizer=optimizer, scheduler=sched,
                      train_data=synth.ListData(batches, seed=5), run_dir=run_dir,
                      config=LoopConfig(log_every=1, **cfg), clock=clock)
    return trainer, clock, recorded_rates(trainer)


@pytest.mark.parametrize("per_update", [1.0, 3.0])
def test_a_time_budget_places_the_cooldown_by_the_time_left(synth, per_update):
    """A fast and a slow machine: both cool down over the last half of their minutes and end at 0."""
    trainer, clock, rates = timed_trainer(synth, per_update=per_update, minutes=1.0)
    result = trainer.fit()
    assert result.stopped_by == "minutes" and result.steps == round(60 / per_update)
    for k, rate in enumerate(rates):  # update k + 1 started after k * per_update seconds
        used = k * per_update / 60
        assert rate == pytest.approx(1e-3 * min(1.0, (1 - used) / 0.5)), k
    assert rates[-1] == pytest.approx(1e-3 * per_update / 30) and rates[0] == 1e-3  # cooled down


def test_a_time_budget_keeps_the_final_evaluations_time_in_reserve(synth):
    trainer, clock, rates = timed_trainer(synth, per_update=1.0, per_eval=2.0, minutes=2.0,
                                          eval_every=7, end_evals=2)
    result = trainer.fit()
    # 4 s are kept for the two evaluations that follow the stop (the trainer's final one, and
    # one more for an average): with them the run ends within its 120 s, and cooled down
    assert result.stopped_by == "minutes" and trainer.state.last_eval_step == result.steps
    assert 120.0 - 2.0 - 4.0 < clock.now + 2.0 <= 120.0
    assert rates[-1] < 0.05 * rates[0]
    trainer, clock, rates = timed_trainer(synth, per_update=1.0, per_eval=2.0, minutes=2.0,
                                          eval_every=7, end_evals=0)
    trainer.fit()
    assert clock.now > 120.0  # without the reserve the final evaluation runs past the budget


def test_resume_under_a_time_budget_continues_exactly(synth, tmp_path):
    """SIGTERM at update 15 (an evaluation's) of 20, resume: the same rates and weights as the run never stopped
    (the clock's time, evaluations included, and the cool-down's progress come back)."""
    def run(run_dir, resume=False, stop_at=None):
        trainer, clock, rates = timed_trainer(synth, per_update=1.0, per_eval=2.0, share=0.6,
                                              run_dir=run_dir, minutes=0.5, eval_every=5, seed=11)
        clock.now = 1000.0 * (1 + resume)  # a new process: another clock origin
        if stop_at is not None:
            loss = trainer.task.loss

            def stopping(model, batch):
                if clock.now == 1000.0 + stop_at - 1 + 2.0 * ((stop_at - 1) // 5):
                    os.kill(os.getpid(), signal.SIGTERM)
                return loss(model, batch)

            trainer.task.loss = stopping
            with pytest.raises(RunStopped):
                trainer.fit()
        else:
            trainer.fit(resume=resume)
        return trainer, rates

    straight, straight_rates = run(tmp_path / "straight")
    stopped, _ = run(tmp_path / "split", stop_at=15)
    assert stopped.state.step == 15
    resumed, resumed_rates = run(tmp_path / "split", resume=True)
    assert straight.state.step == 20 and len(resumed_rates) == 20 - 15
    assert resumed_rates == straight_rates[15:] and resumed_rates[-1] < 0.5 * resumed_rates[0]
    for name, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


def test_a_resume_with_more_updates_moves_the_cooldown_to_the_new_end(synth, tmp_path):
    """4 updates cooling down over the last 2, resumed with max_steps 8: updates 5-8 take the
    rates of the schedule planned for 8 (full at 5 and 6, cooling down at 7 and 8), not those of
    the first run's plan, which had already cooled down."""
    batches = [synth.collate(synth.make_pairs(4, seed=i)) for i in range(4)]
    settings = dict(kind="constant", peak_lr=1e-3, cooldown=2)

    def run(max_steps, resume=False):
        model = synth.tiny_model(seed=7)
        optimizer = build_optimizer(model)
        sched = build_scheduler(optimizer, schedule=LRSchedule(**settings, total=max_steps))
        trainer = Trainer(model=model, task=TranslationTask(), optimizer=optimizer,
                          scheduler=sched, train_data=synth.ListData(batches, seed=5),
                          run_dir=tmp_path, config=LoopConfig(max_steps=max_steps, log_every=1,
                                                               eval_every=0))
        rates = recorded_rates(trainer)
        trainer.fit(resume=resume)
        return rates

    first = LRSchedule(**settings, total=4)
    assert run(4) == [first.rate(update) for update in (1, 2, 3, 4)]
    planned = LRSchedule(**settings, total=8)
    assert run(8, resume=True) == [planned.rate(update) for update in (5, 6, 7, 8)]
    assert planned.rate(6) == 1e-3 and planned.rate(8) == 0.5e-3


def test_a_resume_with_more_minutes_places_the_cooldown_by_the_new_budget(synth, tmp_path):
    """A minute cooling down over its second half, resumed with 2 minutes: the first resumed
    update already takes the rate of the new budget (half of it used: full rate), not the
    checkpoint's (all of the old budget used: 0)."""
    first, _, _ = timed_trainer(synth, per_update=1.0, run_dir=tmp_path, minutes=1.0)
    assert first.fit().steps == 60
    resumed, _, rates = timed_trainer(synth, per_update=1.0, run_dir=tmp_path, minutes=2.0)
    assert resumed.fit(resume=True).steps == 120 and len(rates) == 60
    for k, rate in enumerate(rates):  # update 61 + k started after 60 + k seconds
        used = (60 + k) / 120
        assert rate == pytest.approx(1e-3 * min(1.0, (1 - used) / 0.5)), k


@pytest.mark.parametrize("budget, per_update, expect", [
    ({"max_steps": 10}, 2.0, "step 4/10 | epoch 1.00 | "),
    ({"minutes": 1.0}, 3.0, "step 4 | epoch 1.00 | "),
    ({"epochs": 5}, 1.0, "step 4 | epoch 1.00/5 | "),
])
def test_log_lines_give_the_budget_and_an_eta_at_the_pace_so_far(synth, caplog, budget,
                                                                   per_update, expect):
    """4 batches an epoch; at update k the clock reads k * per_update seconds."""
    trainer, clock, _ = timed_trainer(synth, per_update=per_update, **budget)
    with caplog.at_level("INFO", logger="transformer.training.trainer"):
        trainer.fit()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    line = next(text for text in lines if text.startswith(expect))
    total_s = {"max_steps": 10 * per_update, "minutes": 60.0, "epochs": 5 * 4 * per_update}
    left = total_s[next(iter(budget))] - 4 * per_update
    m, s = divmod(int(left), 60)
    assert line.endswith(f"| eta {m}m{s:02d}s"), line
    if "minutes" in budget:
        assert "0m12s/1m00s" in line
    assert trainer.planned_updates(4) == trainer.state.step  # at the end: all of the budget
