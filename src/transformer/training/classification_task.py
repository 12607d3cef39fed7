"""The classification :class:`~transformer.training.task.Task`: the loss of a batch, and
validation that reports accuracy and F1 and tunes multi-label thresholds.

Shapes: B examples in a batch, C labels, N validation examples.

Single-label models are trained with softmax cross-entropy on the gold label; multi-label models
with BCEWithLogits, one independent sigmoid per label. Either loss is summed over the examples of a
batch and the Trainer divides by the number of examples of the whole update.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer.data.batch_types import ClassificationBatch
from transformer.evaluation.label_metrics import (
    classification_report,
    decide,
    to_indicator,
    tune_thresholds,
)
from transformer.inference.classifier import predict_logits, probabilities


def classification_loss(
    logits: Tensor,
    labels: Tensor,
    *,
    multi_label: bool,
    label_smoothing: float = 0.0,
    pos_weight: Tensor | None = None,
) -> Tensor:
    """The loss of ``logits`` (B, C) summed over the batch (the Trainer divides by examples).

    Single-label: cross-entropy against class indices ``labels`` (B,), optionally label-smoothed.
    Multi-label: BCEWithLogits against the indicator ``labels`` (B, C), summed over labels too,
    with ``pos_weight`` (C,) scaling each label's positive term. Computed in float32.
    """
    logits = logits.float()
    if multi_label:
        return F.binary_cross_entropy_with_logits(
            logits, labels.float(), pos_weight=pos_weight, reduction="sum"
        )
    return F.cross_entropy(logits, labels, label_smoothing=label_smoothing, reduction="sum")


class ClassificationTask:
    """The :class:`~transformer.training.task.Task` of a classifier.

    ``valid_ids``/``valid_labels`` (label index lists) are the validation data. Its evaluation
    reports ``loss`` (mean per example), ``accuracy`` (exact match for multi-label), ``micro_f1`` and
    ``macro_f1``. A multi-label task with ``tune=True`` first tunes per-label thresholds on the
    validation data (kept in :attr:`thresholds` for the caller to store with the model); its
    ``macro_f1`` and ``micro_f1`` use them and ``macro_f1_at_0.5`` does not. ``metric`` selects the
    best model: ``"accuracy"`` (single-label default) or ``"macro_f1"`` (multi-label default).
    ``pad_id`` is only used to count tokens for the throughput figure.
    """

    higher_is_better = True

    def __init__(
        self,
        *,
        num_labels: int,
        multi_label: bool,
        valid_ids: Sequence[Sequence[int]] = (),
        valid_labels: Sequence[Sequence[int]] = (),
        metric: str | None = None,
        label_smoothing: float = 0.0,
        pos_weight: Tensor | None = None,
        tune: bool = True,
        pad_id: int = 0,
    ) -> None:
        if len(valid_ids) != len(valid_labels):
            raise ValueError(f"{len(valid_ids)} validation texts but {len(valid_labels)} label lists")
        if metric is None:
            metric = "macro_f1" if multi_label else "accuracy"
        if metric not in ("accuracy", "micro_f1", "macro_f1"):
            raise ValueError(f"metric must be accuracy, micro_f1 or macro_f1, got {metric!r}")
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        if multi_label and label_smoothing:
            raise ValueError("label_smoothing applies to single-label cross-entropy only")
        self.metric = metric
        self.num_labels = num_labels
        self.multi_label = multi_label
        self.valid_ids = [list(r) for r in valid_ids]
        self.valid_gold = to_indicator(valid_labels, num_labels=num_labels)  # (N, C)
        self.label_smoothing = label_smoothing
        self.pos_weight = pos_weight
        self.pad_id = pad_id
        self.tune = tune and multi_label
        self.thresholds: np.ndarray | None = None  # from the latest evaluation

    def loss(self, model: nn.Module, batch: ClassificationBatch) -> Tensor:
        logits = model(batch.tokens)  # (B, C)
        pos_weight = self.pos_weight.to(logits.device) if self.pos_weight is not None else None
        return classification_loss(
            logits, batch.targets, multi_label=self.multi_label,
            label_smoothing=self.label_smoothing, pos_weight=pos_weight,
        )

    def normaliser(self, batch: ClassificationBatch) -> int:
        return len(batch)

    def num_tokens(self, batch: ClassificationBatch) -> int:
        return int((batch.tokens != self.pad_id).sum())

    def evaluate(self, model: nn.Module) -> dict[str, float] | None:
        if not self.valid_ids:
            return None
        logits = predict_logits(model, self.valid_ids)  # (N, C)
        gold = torch.from_numpy(self.valid_gold)
        target = gold.float() if self.multi_label else gold.float().argmax(dim=1)  # (N, C) or (N,)
        loss = float(classification_loss(logits, target, multi_label=self.multi_label)) / len(logits)
        probs = probabilities(logits, multi_label=self.multi_label).numpy()  # (N, C)
        result = {"loss": loss}
        if self.multi_label:
            at_half = classification_report(self.valid_gold, decide(probs, multi_label=True))
            result["macro_f1_at_0.5"] = at_half.macro_f1
            if self.tune:
                self.thresholds = tune_thresholds(probs, self.valid_gold)
        report = classification_report(
            self.valid_gold, decide(probs, multi_label=self.multi_label, thresholds=self.thresholds)
        )
        result.update(accuracy=report.accuracy, micro_f1=report.micro_f1, macro_f1=report.macro_f1)
        return result
