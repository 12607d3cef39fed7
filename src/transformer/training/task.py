"""What the Trainer needs to know about a task: the loss of a batch and how to evaluate.

The Trainer is task-agnostic: it asks a :class:`Task` for the summed loss of a batch, the count
that loss is normalised by (target tokens for translation, examples for classification), the
tokens a batch holds (for throughput) and an evaluation dict holding ``loss`` and the task's
``metric``. The two tasks: :class:`~transformer.training.translation_task.TranslationTask` and
:class:`~transformer.training.classification_task.ClassificationTask`.
"""

from __future__ import annotations

from typing import Any, Protocol

from torch import Tensor, nn


class Task(Protocol):
    """The task-specific half of training; see :class:`~transformer.training.translation_task.TranslationTask` for an example."""

    metric: str  # the evaluation key that selects the best model and drives early stopping
    higher_is_better: bool

    def loss(self, model: nn.Module, batch: Any) -> Tensor:
        """The loss of ``batch`` summed (not averaged) over its ``normaliser(batch)`` items."""
        ...

    def normaliser(self, batch: Any) -> int:
        """How many items ``loss`` sums over (target tokens, or examples)."""
        ...

    def num_tokens(self, batch: Any) -> int:
        """Tokens in the batch, for the tokens-per-second figure."""
        ...

    def evaluate(self, model: nn.Module) -> dict[str, float] | None:
        """Validation figures with at least ``loss`` and ``metric``; None when there is no
        validation data."""
        ...
