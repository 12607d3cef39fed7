"""What makes a learning-rate schedule's settings valid, checked where they are configured
(``config.runs``) and where the schedule is built (``training.schedule.LRSchedule``)."""

from __future__ import annotations

from transformer.config.choices import SCHEDULES, check_choice
from transformer.config.field_error import ConfigError, Field


def check_schedule(*, kind: str, warmup: int, d_model: int, scale: float, peak_lr: float,
                   cooldown: int, total: int | None, cooldown_share: float) -> None:
    """ConfigError naming the first bad setting of a schedule, as a run configuration calls it
    (``schedule``, ``lr_scale`` and ``lr`` for ``kind``, ``scale`` and ``peak_lr``; ``max_steps``
    for ``total``)."""
    check_choice("schedule", kind, SCHEDULES)
    if kind != "constant" and warmup < 1:
        raise ConfigError(Field("warmup"), f" must be at least 1, got {warmup}")
    if d_model < 1:
        raise ConfigError(Field("model.d_model"), f" must be positive, got {d_model}")
    for name, value in (("lr_scale", scale), ("lr", peak_lr)):
        if value <= 0:
            raise ConfigError(Field(name), f" must be positive, got {value}")
    if kind == "linear" and total is None:
        raise ConfigError("the linear schedule needs a total number of updates (",
                          Field("max_steps"), ") to decay to 0")
    if cooldown < 0 or (cooldown and (total is None or total < cooldown)):
        raise ConfigError(f"a cool-down of {cooldown} updates (", Field("cooldown"), ") needs a "
                          "total of at least as many updates (", Field("max_steps"), f"), got {total}")
    if not 0.0 <= cooldown_share <= 1.0:
        raise ConfigError(Field("cooldown_share"), f" must be between 0 and 1, got {cooldown_share}")
    if cooldown and cooldown_share:
        raise ConfigError("give a cool-down in updates (", Field("cooldown"), ") or as a share of "
                          "the budget (", Field("cooldown_share"), "), not both")
