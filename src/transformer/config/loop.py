"""The training loop's settings: what :class:`~transformer.training.trainer.Trainer` is configured
with. Configuration, so it lives here: ``config.runs`` builds it without importing ``training``."""

from __future__ import annotations

from dataclasses import dataclass

from transformer.config.choices import PRECISIONS


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
        if self.epochs is None and self.max_steps is None and self.minutes is None:
            raise ValueError("set at least one of epochs, max_steps or minutes")
        for name in ("epochs", "max_steps", "patience"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if self.minutes is not None and self.minutes <= 0:
            raise ValueError(f"minutes must be positive, got {self.minutes}")
        if self.accumulate < 1:
            raise ValueError(f"accumulate must be at least 1, got {self.accumulate}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.eval_every < 0 or self.log_every < 1:
            raise ValueError(f"bad eval_every={self.eval_every} or log_every={self.log_every}")
        if self.keep_last < 0:
            raise ValueError(f"keep_last must be at least 0, got {self.keep_last}")
        if self.save_every < 0 or self.max_bad_updates < 0 or self.end_evals < 0:
            raise ValueError(f"save_every, max_bad_updates and end_evals must be at least 0, got "
                             f"{self.save_every}, {self.max_bad_updates} and {self.end_evals}")
        if self.save_minutes is not None and self.save_minutes <= 0:
            raise ValueError(f"save_minutes must be positive, got {self.save_minutes}")
