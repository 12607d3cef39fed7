"""What makes a learning-rate schedule's settings valid, checked where they are configured
(``config.runs``) and where the schedule is built (``training.schedule.LRSchedule``)."""

from __future__ import annotations

from transformer.config.choices import SCHEDULES


def check_schedule(*, kind: str, warmup: int, d_model: int, scale: float, peak_lr: float,
                   cooldown: int, total: int | None, cooldown_share: float) -> None:
    """ValueError naming the first bad setting of a schedule (see ``LRSchedule``'s fields)."""
    if kind not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {kind!r}")
    if kind != "constant" and warmup < 1:
        raise ValueError(f"warmup must be at least 1, got {warmup}")
    if d_model < 1:
        raise ValueError(f"d_model must be positive, got {d_model}")
    if scale <= 0 or peak_lr <= 0:
        raise ValueError(f"scale and peak_lr must be positive, got {scale}, {peak_lr}")
    if kind == "linear" and total is None:
        raise ValueError("the linear schedule needs a total number of updates to decay to 0")
    if cooldown < 0 or (cooldown and (total is None or total < cooldown)):
        raise ValueError(f"a cool-down of {cooldown} updates needs a total of at least as "
                         f"many updates (max_steps), got {total}")
    if not 0.0 <= cooldown_share <= 1.0:
        raise ValueError(f"cooldown_share must be between 0 and 1, got {cooldown_share}")
    if cooldown and cooldown_share:
        raise ValueError("give a cool-down in updates (cooldown) or as a share of the budget "
                         "(cooldown_share), not both")
