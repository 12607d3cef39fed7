"""The training loop's settings, counters and result: what :class:`~transformer.training.trainer.Trainer`
is configured with, saves in its checkpoint and reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# the loop's settings are configuration (config/ never imports training/); kept importable here
from transformer.config.loop import LoopConfig as LoopConfig


class EpochData(Protocol):
    """Training batches: for each epoch a deterministic sequence (the same on every call)."""

    def for_epoch(self, epoch: int) -> Sequence[Any]: ...


@dataclass
class TrainState:
    """Counters saved in the checkpoint; ``epoch``/``batch_index`` is the next batch to train on."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0
    elapsed_s: float = 0.0
    tokens: int = 0
    best_metric: float | None = None
    best_step: int | None = None
    bad_evals: int = 0
    last_eval_step: int | None = None
    last_eval: dict[str, float] = field(default_factory=dict)
    skipped_updates: int = 0  # updates skipped for a non-finite loss or gradient (fp32/bf16)
    bad_in_a_row: int = 0  # of which the latest consecutive ones
    eval_s: float = 0.0  # seconds the latest evaluation (and its checkpoint) took


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` reports."""

    steps: int
    epochs: float
    elapsed_s: float
    stopped_by: str
    best_metric: float | None
    best_step: int | None
    last_eval: dict[str, float]
    tokens_per_s: float
