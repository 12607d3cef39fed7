"""The learning-rate schedules: the paper's (equation 3), the peak-lr inverse square root, linear decay."""

from __future__ import annotations

import io

import pytest
import torch

from transformer.training.optimizer import build_optimizer
from transformer.training.schedule import (
    LRSchedule,
    build_scheduler,
    inverse_sqrt_rate,
    noam_rate,
)


def test_noam_is_equation_3():
    d_model, warmup = 512, 4000
    for step in (1, 10, 3999, 4000, 4001, 100_000):
        expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert noam_rate(step, d_model=d_model, warmup=warmup) == pytest.approx(expected)
    assert noam_rate(10, d_model=512, warmup=4000, scale=2.0) == pytest.approx(
        2 * noam_rate(10, d_model=512, warmup=4000)
    )


@pytest.mark.parametrize("kind", ["noam", "inverse_sqrt"])
def test_warmup_peaks_at_warmup_then_decays_as_inverse_sqrt(kind):
    warmup = 50
    schedule = LRSchedule(kind=kind, warmup=warmup, d_model=64, peak_lr=3e-3)
    rates = [schedule.rate(s) for s in range(1, 4 * warmup + 1)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == warmup
    # linear rise: rate(s) = s * rate(1)
    for s in (2, 10, warmup):
        assert schedule.rate(s) == pytest.approx(s * schedule.rate(1))
    # inverse square root after: four times the steps, half the rate
    for s in (warmup, 2 * warmup, 3 * warmup):
        assert schedule.rate(4 * s) == pytest.approx(schedule.rate(s) / 2)


def test_inverse_sqrt_peak_is_peak_lr():
    assert inverse_sqrt_rate(100, peak_lr=5e-4, warmup=100) == pytest.approx(5e-4)
    assert inverse_sqrt_rate(400, peak_lr=5e-4, warmup=100) == pytest.approx(2.5e-4)


def test_scheduler_sets_the_optimizer_lr_once_per_step_and_round_trips():
    model = torch.nn.Linear(3, 3)
    opt = build_optimizer(model)
    schedule = LRSchedule(kind="noam", warmup=10, d_model=32)
    sched = build_scheduler(opt, schedule=schedule)
    for update in range(1, 16):
        assert opt.param_groups[0]["lr"] == pytest.approx(schedule.rate(update))
        opt.step()
        sched.step()
    buffer = io.BytesIO()
    torch.save(sched.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    opt2 = build_optimizer(model)
    sched2 = build_scheduler(opt2, schedule=LRSchedule(kind="noam", warmup=10, d_model=32))
    sched2.load_state_dict(state)
    assert sched2.last_epoch == sched.last_epoch
    assert sched2.get_last_lr() == pytest.approx(sched.get_last_lr())


def test_adam_has_the_papers_settings():
    opt = build_optimizer(torch.nn.Linear(2, 2))
    group = opt.param_groups[0]
    assert isinstance(opt, torch.optim.Adam)
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9


@pytest.mark.parametrize("kwargs", [{"kind": "cosine"}, {"warmup": 0}, {"d_model": 0}, {"peak_lr": 0}])
def test_bad_schedule_raises(kwargs):
    with pytest.raises(ValueError):
        LRSchedule(**kwargs)


def test_linear_cooldown_to_the_last_update():
    base = LRSchedule(kind="inverse_sqrt", warmup=10, peak_lr=1e-3)
    cool = LRSchedule(kind="inverse_sqrt", warmup=10, peak_lr=1e-3, cooldown=40, total=100)
    for step in (1, 10, 30, 60):  # untouched before the cool-down starts
        assert cool.rate(step) == base.rate(step)
    # then the factor falls linearly: (total - step + 1) / cooldown
    for step in (61, 80, 100):
        assert cool.rate(step) == pytest.approx(base.rate(step) * (101 - step) / 40)
    assert cool.rate(100) < cool.rate(99) < cool.rate(61)
    assert cool.rate(150) == pytest.approx(base.rate(150) / 40)  # past the total: the floor
    with pytest.raises(ValueError, match="needs a total"):
        LRSchedule(kind="inverse_sqrt", warmup=10, cooldown=40)
    with pytest.raises(ValueError, match="needs a total"):
        LRSchedule(kind="inverse_sqrt", warmup=10, cooldown=40, total=20)


def test_linear_decay_warms_up_then_reaches_zero_at_the_last_update():
    rate = LRSchedule(kind="linear", peak_lr=1e-3, warmup=10, total=110)
    assert rate(0) == pytest.approx(1e-4)  # update 1
    assert rate(9) == pytest.approx(1e-3)  # update 10: the peak
    assert rate(59) == pytest.approx(0.5e-3)  # update 60: halfway down
    assert rate(109) == 0.0 and rate(500) == 0.0
    model = torch.nn.Linear(2, 2)
    sched = build_scheduler(torch.optim.Adam(model.parameters(), lr=1.0), schedule=rate)
    buffer = io.BytesIO()
    torch.save(sched.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert state["lr_lambdas"][0]["kind"] == "linear" and state["lr_lambdas"][0]["total"] == 110
    with pytest.raises(ValueError, match="needs a total"):
        LRSchedule(kind="linear", warmup=10)


def test_budget_cooldown_falls_to_zero_over_the_last_share_of_the_budget():
    base = LRSchedule(kind="inverse_sqrt", warmup=10, peak_lr=1e-3)
    cool = LRSchedule(kind="inverse_sqrt", warmup=10, peak_lr=1e-3, cooldown_share=0.25)
    for progress, factor in ((0.0, 1.0), (0.5, 1.0), (0.75, 1.0), (0.8, 0.8), (0.95, 0.2),
                             (1.0, 0.0), (1.3, 0.0)):
        cool.progress = progress
        assert cool.rate(50) == pytest.approx(base.rate(50) * factor), progress
    # on an update budget it is the cool-down in updates: progress before update k is (k-1)/total
    steps = LRSchedule(kind="inverse_sqrt", warmup=10, peak_lr=1e-3, cooldown=40, total=100)
    share = LRSchedule(kind="inverse_sqrt", warmup=10, peak_lr=1e-3, cooldown_share=0.4)
    for step in (1, 30, 61, 80, 100):
        share.progress = (step - 1) / 100
        assert share.rate(step) == pytest.approx(steps.rate(step)), step
    with pytest.raises(ValueError, match="between 0 and 1"):
        LRSchedule(cooldown_share=1.5)
    with pytest.raises(ValueError, match="not both"):
        LRSchedule(cooldown=10, total=100, cooldown_share=0.2)


def test_budget_progress_is_saved_with_the_scheduler():
    model = torch.nn.Linear(2, 2)
    sched = build_scheduler(torch.optim.Adam(model.parameters(), lr=1.0),
                            schedule=LRSchedule(kind="constant", peak_lr=1.0, cooldown_share=0.5))
    sched.lr_lambdas[0].progress = 0.75
    buffer = io.BytesIO()
    torch.save(sched.state_dict(), buffer)
    buffer.seek(0)
    fresh = build_scheduler(torch.optim.Adam(model.parameters(), lr=1.0),
                            schedule=LRSchedule(kind="constant", peak_lr=1.0, cooldown_share=0.5))
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    assert fresh.lr_lambdas[0].progress == 0.75 and fresh.lr_lambdas[0].rate(9) == 0.5
