"""Classification metrics: accuracy, micro and macro precision/recall/F1, a per-label table, and
per-label decision thresholds for multi-label models.

Shapes: N examples, C labels, G candidate thresholds.

Gold labels and predictions are boolean indicator matrices (N, C): row ``i`` marks the labels of
example ``i``. A single-label problem is the special case with exactly one True per row, so the
same definitions cover both:

- accuracy: the share of rows whose predicted label set equals the gold set (for single-label,
  ordinary accuracy; for multi-label, exact match or "subset accuracy");
- per label: precision = TP / (TP + FP), recall = TP / (TP + FN), F1 = 2 TP / (2 TP + FP + FN),
  each 0 where its denominator is 0 (scikit-learn's ``zero_division=0``);
- micro: the same formulas on TP, FP, FN summed over labels (for single-label, micro F1 equals
  accuracy); macro: the unweighted mean of the per-label figures over all C labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_THRESHOLD = 0.5


def _ratio(num: np.ndarray | float, den: np.ndarray | float) -> np.ndarray:
    """``num / den`` elementwise, 0 where ``den`` is 0."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den > 0)


def to_indicator(labels: Sequence[Sequence[int]], *, num_labels: int) -> np.ndarray:
    """Label index lists (one list per example) -> a boolean indicator matrix (N, C).

    Raises ValueError naming an index outside ``[0, num_labels)``.
    """
    out = np.zeros((len(labels), num_labels), dtype=bool)
    for i, row in enumerate(labels):
        for c in row:
            if not 0 <= c < num_labels:
                raise ValueError(f"label index {c} of example {i} is outside [0, {num_labels})")
            out[i, c] = True
    return out


def decide(
    probs: np.ndarray, *, multi_label: bool, thresholds: np.ndarray | Sequence[float] | None = None
) -> np.ndarray:
    """Predicted label sets (N, C) bool from probabilities (N, C).

    Single-label: the argmax of each row. Multi-label: every label whose probability is at least
    its threshold (``thresholds`` (C,), default 0.5 for all); a row may end up with no label.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2:
        raise ValueError(f"probs must be (N, C), got shape {probs.shape}")
    if not multi_label:
        out = np.zeros(probs.shape, dtype=bool)
        if probs.shape[0]:
            out[np.arange(probs.shape[0]), probs.argmax(axis=1)] = True
        return out
    if thresholds is None:
        thresholds = np.full(probs.shape[1], DEFAULT_THRESHOLD)
    thresholds = np.asarray(thresholds, dtype=np.float64)
    if thresholds.shape != (probs.shape[1],):
        raise ValueError(f"thresholds must have shape ({probs.shape[1]},), got {thresholds.shape}")
    return probs >= thresholds[None, :]


@dataclass(frozen=True)
class LabelScores:
    """One row of the per-label table."""

    label: str
    precision: float
    recall: float
    f1: float
    support: int  # gold examples with this label
    predicted: int  # examples predicted with this label


@dataclass(frozen=True)
class ClassificationReport:
    """Everything :func:`classification_report` computes; ``to_dict()`` is JSON-ready."""

    num_examples: int
    accuracy: float
    micro_precision: float
    micro_recall: float
    micro_f1: float
    macro_precision: float
    macro_recall: float
    macro_f1: float
    labels: tuple[LabelScores, ...]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["labels"] = [asdict(row) for row in self.labels]
        return data

    def format(self, *, digits: int = 3) -> str:
        """A plain-text summary followed by the per-label precision/recall/F1 table."""
        width = max([len("macro avg"), *(len(row.label) for row in self.labels)])
        lines = [
            f"examples {self.num_examples}  accuracy {self.accuracy:.{digits}f}  "
            f"micro-F1 {self.micro_f1:.{digits}f}  macro-F1 {self.macro_f1:.{digits}f}",
            "",
            f"{'label':<{width}}  precision  recall     f1  support  predicted",
        ]
        for row in self.labels:
            lines.append(
                f"{row.label:<{width}}  {row.precision:9.{digits}f}  {row.recall:6.{digits}f}  "
                f"{row.f1:5.{digits}f}  {row.support:7d}  {row.predicted:9d}"
            )
        lines.append(
            f"{'micro avg':<{width}}  {self.micro_precision:9.{digits}f}  "
            f"{self.micro_recall:6.{digits}f}  {self.micro_f1:5.{digits}f}"
        )
        lines.append(
            f"{'macro avg':<{width}}  {self.macro_precision:9.{digits}f}  "
            f"{self.macro_recall:6.{digits}f}  {self.macro_f1:5.{digits}f}"
        )
        return "\n".join(lines)


def per_label_f1(gold: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """F1 of each label (C,) for indicator matrices ``gold`` and ``pred`` (N, C)."""
    gold = np.asarray(gold, dtype=bool)
    pred = np.asarray(pred, dtype=bool)
    tp = (gold & pred).sum(axis=0)
    fp = (~gold & pred).sum(axis=0)
    fn = (gold & ~pred).sum(axis=0)
    return _ratio(2 * tp, 2 * tp + fp + fn)


def classification_report(
    gold: np.ndarray, pred: np.ndarray, *, label_names: Sequence[str] | None = None
) -> ClassificationReport:
    """Accuracy, micro and macro figures and the per-label table for indicator matrices (N, C).

    ``label_names`` (C names) label the table rows; default ``"0"``, ``"1"``, ...
    """
    gold = np.asarray(gold, dtype=bool)
    pred = np.asarray(pred, dtype=bool)
    if gold.ndim != 2 or gold.shape != pred.shape:
        raise ValueError(f"gold {gold.shape} and pred {pred.shape} must be equal (N, C) shapes")
    num_labels = gold.shape[1]
    names = [str(c) for c in range(num_labels)] if label_names is None else list(label_names)
    if len(names) != num_labels:
        raise ValueError(f"{len(names)} label names for {num_labels} labels")
    tp = (gold & pred).sum(axis=0)  # (C,)
    fp = (~gold & pred).sum(axis=0)  # (C,)
    fn = (gold & ~pred).sum(axis=0)  # (C,)
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn)
    TP, FP, FN = tp.sum(), fp.sum(), fn.sum()
    n = gold.shape[0]
    accuracy = float((gold == pred).all(axis=1).mean()) if n else 0.0
    rows = tuple(
        LabelScores(
            label=names[c],
            precision=float(precision[c]),
            recall=float(recall[c]),
            f1=float(f1[c]),
            support=int(tp[c] + fn[c]),
            predicted=int(tp[c] + fp[c]),
        )
        for c in range(num_labels)
    )

    def mean(values: np.ndarray) -> float:
        return float(values.mean()) if num_labels else 0.0

    return ClassificationReport(
        num_examples=n,
        accuracy=accuracy,
        micro_precision=float(_ratio(TP, TP + FP)),
        micro_recall=float(_ratio(TP, TP + FN)),
        micro_f1=float(_ratio(2 * TP, 2 * TP + FP + FN)),
        macro_precision=mean(precision),
        macro_recall=mean(recall),
        macro_f1=mean(f1),
        labels=rows,
    )


def default_grid() -> np.ndarray:
    """Candidate thresholds 0.01, 0.02, ..., 0.99 (0.5 among them)."""
    return np.round(np.arange(1, 100) / 100.0, 2)


def tune_thresholds(
    probs: np.ndarray, gold: np.ndarray, *, grid: np.ndarray | Sequence[float] | None = None
) -> np.ndarray:
    """Per-label thresholds (C,) that maximise each label's F1 on a validation set.

    ``probs`` (N, C) are sigmoid probabilities and ``gold`` (N, C) the indicator matrix. Each label
    takes the candidate of ``grid`` (default :func:`default_grid`) with the highest F1; ties go to
    the candidate nearest 0.5, and a label whose F1 is 0 at every candidate keeps 0.5. Since 0.5 is
    always a candidate and macro-F1 is the mean of per-label F1, the tuned thresholds never give a
    lower macro-F1 on this validation set than 0.5 for every label.
    """
    probs = np.asarray(probs, dtype=np.float64)
    gold = np.asarray(gold, dtype=bool)
    if probs.ndim != 2 or probs.shape != gold.shape:
        raise ValueError(f"probs {probs.shape} and gold {gold.shape} must be equal (N, C) shapes")
    candidates = default_grid() if grid is None else np.asarray(grid, dtype=np.float64)
    candidates = np.unique(np.append(candidates, DEFAULT_THRESHOLD))  # (G,)
    # Ties go to the candidate nearest 0.5: visit candidates in that order and keep the first max.
    order = np.argsort(np.abs(candidates - DEFAULT_THRESHOLD), kind="stable")
    candidates = candidates[order]  # (G,)
    out = np.full(probs.shape[1], DEFAULT_THRESHOLD)
    for c in range(probs.shape[1]):
        pred = probs[:, c, None] >= candidates[None, :]  # (N, G)
        pos = gold[:, c, None]  # (N, 1)
        tp = (pred & pos).sum(axis=0)
        fp = (pred & ~pos).sum(axis=0)
        fn = (~pred & pos).sum(axis=0)
        f1 = _ratio(2 * tp, 2 * tp + fp + fn)  # (G,)
        if f1.max() > 0:
            out[c] = candidates[int(f1.argmax())]
    return out
