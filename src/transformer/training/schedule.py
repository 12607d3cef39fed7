"""Learning-rate schedules, every one the package has: the paper's warmup + inverse square root
(equation 3), the same shape with an explicit peak learning rate, a constant rate, and linear warmup
followed by linear decay to 0 (the classifier's short runs).

``step`` counts optimizer updates from 1, as ``step_num`` in the paper does. The first two rates
rise linearly for ``warmup`` updates, peak at update ``warmup`` and then decay as ``step^-0.5``;
``linear`` rises the same way and then falls linearly to 0 at update ``total``.

Short runs end better cooled down, which the paper's schedule never does. Two linear cool-downs:
``cooldown`` brings the rate towards 0 over the last ``cooldown`` updates before ``total``
(= max_steps); ``cooldown_share`` brings it to 0 over the last share of the run's *budget*, whatever
the budget is: updates, epochs or wall-clock minutes, whichever runs out first. The
:class:`~transformer.training.trainer.Trainer` tells the schedule how much of its budget is used
(``progress``, from 0 to 1) before every scheduler step, so a run bounded by time places its
cool-down by the time left and ends cooled down on a fast machine or a slow one. ``progress`` is a
field, so it is saved and restored with the scheduler's state.

A resumed run may be given another budget (``--max-steps``, ``--minutes``): its schedule then
follows the new one. :func:`keep_settings` puts back the settings the run built (``total`` is
the new ``max_steps``) over those its checkpoint restored, and :func:`rerate` sets the rate of
the next update by them.

:func:`build_scheduler` wraps them in a ``torch.optim.lr_scheduler.LambdaLR`` whose multiplier *is*
the learning rate (the optimizer's base lr is set to 1), so ``scheduler.state_dict()`` round-trips
through ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR, LRScheduler

from transformer.config.schedule import check_schedule


def noam_rate(step: int, *, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """Equation (3): ``scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def inverse_sqrt_rate(step: int, *, peak_lr: float, warmup: int) -> float:
    """Linear warmup to ``peak_lr`` at update ``warmup``, then ``peak_lr * sqrt(warmup / step)``."""
    step = max(step, 1)
    return peak_lr * min(step / warmup, (warmup / step) ** 0.5)


def linear_rate(step: int, *, peak_lr: float, warmup: int, total: int) -> float:
    """Linear warmup to ``peak_lr`` at update ``warmup``, then linear decay to 0 at update ``total``."""
    if step <= warmup:
        return peak_lr * step / warmup
    return peak_lr * max(0.0, (total - step) / max(1, total - warmup))


@dataclass
class LRSchedule:
    """A LambdaLR-compatible rate: ``schedule(i)`` is the lr of update ``i + 1``.

    LambdaLR calls its function with the number of scheduler steps taken so far (0 for the first
    update); its ``state_dict`` stores this object's fields, which are plain numbers and strings.
    """

    kind: str = "noam"
    warmup: int = 4000
    d_model: int = 512
    scale: float = 1.0
    peak_lr: float = 1e-3
    # linear cool-down: over the last ``cooldown`` updates before update ``total`` the rate is
    # multiplied by a factor falling linearly from 1 to 1 / cooldown (0: no cool-down)
    cooldown: int = 0
    total: int | None = None
    # budget cool-down: over the last ``cooldown_share`` of the budget the rate is multiplied by
    # (1 - progress) / cooldown_share, falling linearly to 0 when the budget is spent (0: none)
    cooldown_share: float = 0.0
    progress: float = 0.0  # the share of the budget used so far (set by the Trainer)

    def __post_init__(self) -> None:
        check_schedule(kind=self.kind, warmup=self.warmup, d_model=self.d_model, scale=self.scale,
                       peak_lr=self.peak_lr, cooldown=self.cooldown, total=self.total,
                       cooldown_share=self.cooldown_share)

    def rate(self, step: int) -> float:
        """The learning rate of update ``step`` (1-based)."""
        if self.kind == "noam":
            rate = noam_rate(step, d_model=self.d_model, warmup=self.warmup, scale=self.scale)
        elif self.kind == "inverse_sqrt":
            rate = inverse_sqrt_rate(step, peak_lr=self.peak_lr, warmup=self.warmup)
        elif self.kind == "linear":
            assert self.total is not None
            rate = linear_rate(step, peak_lr=self.peak_lr, warmup=self.warmup, total=self.total)
        else:
            rate = self.peak_lr
        if self.cooldown and self.total is not None:
            rate *= min(1.0, max(self.total - step + 1, 1) / self.cooldown)
        if self.cooldown_share:
            rate *= min(1.0, max(0.0, 1.0 - self.progress) / self.cooldown_share)
        return rate

    def __call__(self, scheduler_steps: int) -> float:
        return self.rate(scheduler_steps + 1)


def build_scheduler(optimizer: Optimizer, *, schedule: LRSchedule) -> LambdaLR:
    """A LambdaLR that sets every parameter group's lr to ``schedule.rate(update)``.

    Call ``scheduler.step()`` once per optimizer update (not per micro-batch).
    """
    for group in optimizer.param_groups:
        group["lr"] = 1.0
    return LambdaLR(optimizer, lr_lambda=schedule, last_epoch=-1)


def rates_of(scheduler: LRScheduler | None) -> list[LRSchedule]:
    """The :class:`LRSchedule` rates ``scheduler`` applies (one per parameter group; none for a
    scheduler :func:`build_scheduler` did not make)."""
    lambdas: Any = getattr(scheduler, "lr_lambdas", ())
    return [rate for rate in lambdas if isinstance(rate, LRSchedule)]


def set_progress(scheduler: LRScheduler, progress: float) -> None:
    """Tell every rate of ``scheduler`` that follows a budget the share of it used (0 to 1)."""
    for rate in getattr(scheduler, "lr_lambdas", ()):
        if hasattr(rate, "progress"):
            rate.progress = progress


def settings_of(scheduler: LRScheduler | None) -> list[LRSchedule]:
    """Copies of ``scheduler``'s rates as they are now, for :func:`keep_settings`."""
    return [copy.copy(rate) for rate in rates_of(scheduler)]


def keep_settings(scheduler: LRScheduler | None, settings: list[LRSchedule]) -> bool:
    """Give ``scheduler``'s rates the ``settings`` (from :func:`settings_of` before a checkpoint's
    state was loaded into it) but their ``progress``, which is the run's state. Returns whether
    any setting the checkpoint held differed."""
    changed = False
    for rate, wanted in zip(rates_of(scheduler), settings, strict=True):
        for field in dataclasses.fields(LRSchedule):
            if field.name != "progress" and getattr(rate, field.name) != getattr(wanted, field.name):
                setattr(rate, field.name, getattr(wanted, field.name))
                changed = True
    return changed


def rerate(scheduler: LambdaLR) -> None:
    """Set every parameter group's learning rate to its rate for the next update (between two
    updates, after the rates' settings or progress changed)."""
    lrs = [base_lr * rate(scheduler.last_epoch)
           for rate, base_lr in zip(scheduler.lr_lambdas, scheduler.base_lrs, strict=True)]
    for group, lr in zip(scheduler.optimizer.param_groups, lrs, strict=True):
        group["lr"] = lr
    scheduler._last_lr = lrs  # what get_last_lr() answers and the scheduler's state holds
