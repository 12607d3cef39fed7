"""The training loop's settings: what :class:`~transformer.training.trainer.Trainer` is configured
with. Configuration, so it lives here: ``config.runs`` builds it without importing ``training``."""

from __future__ import annotations

from dataclasses import dataclass

from transformer.config.choices import PRECISIONS, check_choice
from transformer.config.field_error import ConfigError, Field


@dataclass(frozen=True)
class LoopConfig:
    """The knobs of the loop itself (model, optimizer and schedule are built by the caller)."""

    epochs: int | None = None
    max_steps: int | None = None
    minutes: float | None = None  # wall-clock budget of the whole run, resumed parts included
    accumulate: int = 1  # micro-batches per optimizer update
    clip_norm: float | None = 1.0  # the paper does not clip; None or 0 turns clipping off
    precision: str = "fp32"  # "bf16" autocast on CPU or GPU, "fp16" with a grad scaler on GPU
    eval_every: int = 1000  # updates between evaluations (and checkpoints); 0: only at the end
    log_every: int = 100
    patience: int | None = None  # evaluations without improvement before stopping
    keep_last: int = 0  # weights of the last N evaluations kept in RUN_DIR/snapshots/ (averaging)
    seed: int = 0
    save_every: int = 0  # updates between checkpoints besides those at evaluations (0: none)
    save_minutes: float | None = None  # a checkpoint at least this often (wall clock)
    max_bad_updates: int = 10  # stop after this many non-finite updates in a row (0: never)
    # evaluations that follow a stop (the final one; one more to validate an average): a
    # ``minutes`` budget keeps the time they take (the last evaluation's) in reserve, so the run
    # with them ends within its minutes
    end_evals: int = 1

    def __post_init__(self) -> None:
        """ConfigError naming the first bad field."""
        if self.epochs is None and self.max_steps is None and self.minutes is None:
            raise ConfigError("set at least one of ", Field("epochs"), ", ", Field("max_steps"),
                              " or ", Field("minutes"))
        for name, least in (("epochs", 1), ("max_steps", 1), ("patience", 1), ("accumulate", 1),
                            ("log_every", 1), ("eval_every", 0), ("keep_last", 0),
                            ("save_every", 0), ("max_bad_updates", 0), ("end_evals", 0)):
            value = getattr(self, name)
            if value is not None and value < least:
                raise ConfigError(Field(name), f" must be at least {least}, got {value}")
        for name in ("minutes", "save_minutes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(Field(name), f" must be positive, got {value}")
        check_choice("precision", self.precision, PRECISIONS)
