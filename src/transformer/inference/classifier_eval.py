"""Scoring a classifier on labelled data: accuracy, micro and macro F1 and the per-label table,
and the labelled data a classifier is evaluated on (a corpus split or a file): what
``transformer classify evaluate`` does, beside :mod:`transformer.inference.translation_eval`.

Shapes: N texts, C labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer.data.classification import ClassificationData
from transformer.errors import InputError
from transformer.evaluation.label_metrics import (
    ClassificationReport,
    classification_report,
    to_indicator,
)
from transformer.inference.classifier import Classifier


def evaluate_classifier(classifier: Classifier, data: ClassificationData) -> ClassifierEvaluation:
    """Accuracy, micro and macro F1 and the per-label table of ``classifier`` on ``data`` (whose
    label ids must follow the model's label names), plus truncation and empty-text counts."""
    if tuple(data.label_names) != classifier.label_names:
        raise InputError(
            f"{data.name or 'data'}: its labels ({_short(data.label_names)}) differ from the "
            f"model's ({_short(classifier.label_names)})"
        )
    out = classifier.predict(data.texts)
    gold = to_indicator(data.labels, num_labels=len(classifier.label_names))
    report = classification_report(gold, out.chosen, label_names=classifier.label_names)
    return ClassifierEvaluation(
        report=report, data=data.name, multi_label=classifier.multi_label,
        max_tokens=classifier.max_tokens, num_truncated=out.num_truncated,
        num_empty=out.num_empty + getattr(data, "num_empty_dropped", 0),
    )


def _short(names: Sequence[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


@dataclass
class ClassifierEvaluation:
    """What :meth:`Classifier.evaluate` returns: the report and what was done to the inputs
    (``num_empty`` counts empty texts, including rows the reader dropped for having no text)."""

    report: ClassificationReport
    data: str
    multi_label: bool
    max_tokens: int
    num_truncated: int
    num_empty: int

    def to_dict(self) -> dict[str, Any]:
        return {**self.report.to_dict(), "data": self.data, "multi_label": self.multi_label,
                "max_tokens": self.max_tokens, "num_truncated": self.num_truncated,
                "num_empty": self.num_empty}

    def format(self) -> str:
        head = (f"{self.data}: {self.report.num_examples} texts, {self.num_truncated} truncated to "
                f"{self.max_tokens} tokens, {self.num_empty} empty")
        return head + "\n" + self.report.format()


def evaluation_data(
    classifier: Classifier,
    *,
    data: str | None = None,
    split: str = "test",
    file: str | Path | None = None,
    text_column: str | int | None = None,
    label_column: str | int | None = None,
    format: str | None = None,
    label_separator: str | None = None,
) -> ClassificationData:
    """Labelled data to evaluate ``classifier`` on: a known corpus split (``data``, ``split``; the
    held-out rows are drawn by the recipe stored with the model when it was trained on that corpus)
    or a ``file`` read with the model's label names (columns default to those used in training)."""
    from transformer.data.classification import read_classification
    from transformer.data.classification_splits import SplitRecipe, corpus_splits
    from transformer.data.labels import LabelVocabulary

    if (data is None) == (file is None):
        raise InputError("give either a corpus name (--data) or a labelled file (--file)")
    stored = classifier.record.trained_on
    if data is not None:
        recipe = None
        if stored.corpus == data.lower() and stored.recipe:
            recipe = SplitRecipe.from_dict(dict(stored.recipe))
        return corpus_splits(data, split, recipe=recipe)[split]
    return read_classification(
        file,
        text_column=text_column if text_column is not None else stored.text_column,
        label_column=label_column if label_column is not None else stored.label_column,
        labels=LabelVocabulary(classifier.label_names),
        format=format,
        label_separator=label_separator if label_separator is not None else stored.label_separator,
    )
