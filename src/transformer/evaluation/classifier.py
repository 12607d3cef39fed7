"""A trained classifier read from its model directory: predict labels with probabilities and
evaluate on labelled data.

Shapes: N texts, C labels.

    clf = Classifier.load("runs/nsmc")
    out = clf.predict(["재밌어요", "별로"])      # out.probs (N, C), out.chosen (N, C) bool
    figures = clf.evaluate(data)                  # accuracy, micro/macro F1, per-label table

Texts longer than the model's limit are truncated (and counted); an empty text is kept and gets
whatever the model predicts for no tokens at all (counted too), so the outputs line up with the
inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from transformer.data.classification import ClassificationData
from transformer.errors import InputError
from transformer.evaluation.classification import (
    ClassificationReport,
    classification_report,
    decide,
    to_indicator,
)
from transformer.model_dir import CONFIG_FILE, LoadedModel, load_model_dir
from transformer.training.classification import predict_logits, probabilities


@dataclass
class Predictions:
    """What :meth:`Classifier.predict` returns; row ``i`` belongs to input text ``i``."""

    probs: np.ndarray  # (N, C) softmax (single-label) or per-label sigmoid (multi-label)
    chosen: np.ndarray  # (N, C) bool: the predicted label set
    label_names: tuple[str, ...]
    num_truncated: int
    num_empty: int

    def labels(self, i: int) -> list[tuple[str, float]]:
        """The predicted labels of text ``i`` with their probabilities, most probable first."""
        picked = np.flatnonzero(self.chosen[i])
        picked = picked[np.argsort(-self.probs[i, picked], kind="stable")]
        return [(self.label_names[c], float(self.probs[i, c])) for c in picked]

    def to_rows(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        """One JSON-ready dict per text: text, labels, and the probability of every label."""
        return [
            {
                "text": text,
                "labels": [name for name, _ in self.labels(i)],
                "probabilities": {n: round(float(p), 6) for n, p in zip(self.label_names, self.probs[i], strict=True)},
            }
            for i, text in enumerate(texts)
        ]


class Classifier:
    """A :class:`~transformer.model.TransformerClassifier` with its tokenizer, label names and
    (multi-label) decision thresholds, as :func:`~transformer.model_dir.load_model_dir`
    read them."""

    def __init__(self, loaded: LoadedModel, *, source: str = CONFIG_FILE) -> None:
        config = loaded.config
        if config.get("task") != "classification":
            raise InputError(f"{source}: task is {config.get('task')!r}, not a classifier")
        self.model = loaded.model
        self.tokenizer = loaded.src_tokenizer
        self.config = config
        names = config.get("labels")
        if not isinstance(names, list) or len(names) != self.model.num_labels:
            raise InputError(f"{source}: 'labels' must list the model's {self.model.num_labels} label names")
        self.label_names = tuple(str(n) for n in names)
        self.multi_label = bool(self.model.multi_label)
        thresholds = config.get("thresholds")
        self.thresholds: np.ndarray | None = None
        if self.multi_label and thresholds is not None:
            if not isinstance(thresholds, list) or len(thresholds) != len(names):
                raise InputError(f"{source}: 'thresholds' must hold one number per label")
            self.thresholds = np.asarray(thresholds, dtype=np.float64)

    @classmethod
    def load(cls, run_dir: str | Path, *, device: str | torch.device = "cpu") -> Classifier:
        """Read a classifier's model directory; InputError for a missing, corrupt or translation one."""
        return cls(load_model_dir(run_dir, device=device), source=str(Path(run_dir) / CONFIG_FILE))

    @property
    def max_tokens(self) -> int:
        return self.model.max_tokens

    def encode(self, texts: Sequence[str]) -> tuple[list[list[int]], int, int]:
        """Token ids cut to :attr:`max_tokens`, and the numbers of truncated and empty texts."""
        ids = self.tokenizer.encode_batch(list(texts))
        truncated = sum(len(row) > self.max_tokens for row in ids)
        empty = sum(not row for row in ids)
        return [row[: self.max_tokens] for row in ids], truncated, empty

    def predict(self, texts: Sequence[str], *, batch_tokens: int = 16384) -> Predictions:
        """Probabilities and predicted label sets for ``texts`` (see the module docstring)."""
        ids, truncated, empty = self.encode(texts)
        if not ids:
            shape = (0, len(self.label_names))
            return Predictions(np.zeros(shape), np.zeros(shape, bool), self.label_names, 0, 0)
        logits = predict_logits(self.model, ids, batch_tokens=batch_tokens)  # (N, C)
        probs = probabilities(logits, multi_label=self.multi_label).numpy()  # (N, C)
        chosen = decide(probs, multi_label=self.multi_label, thresholds=self.thresholds)
        return Predictions(probs, chosen, self.label_names, truncated, empty)

    def evaluate(self, data: ClassificationData) -> ClassifierEvaluation:
        """Accuracy, micro and macro F1 and the per-label table on ``data`` (whose label ids must
        follow this model's label names), plus truncation and empty-text counts."""
        if tuple(data.label_names) != self.label_names:
            raise InputError(
                f"{data.name or 'data'}: its labels ({_short(data.label_names)}) differ from the "
                f"model's ({_short(self.label_names)})"
            )
        out = self.predict(data.texts)
        gold = to_indicator(data.labels, num_labels=len(self.label_names))
        report = classification_report(gold, out.chosen, label_names=self.label_names)
        return ClassifierEvaluation(
            report=report, data=data.name, multi_label=self.multi_label, max_tokens=self.max_tokens,
            num_truncated=out.num_truncated,
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
    from transformer.data.classification import LabelVocabulary, read_classification
    from transformer.data.classification_splits import SplitRecipe, corpus_splits

    if (data is None) == (file is None):
        raise InputError("give either a corpus name (--data) or a labelled file (--file)")
    stored = classifier.config.get("data") or {}
    if data is not None:
        recipe = None
        if stored.get("name") == data.lower() and stored.get("recipe"):
            recipe = SplitRecipe.from_dict(stored["recipe"])
        return corpus_splits(data, split, recipe=recipe)[split]
    return read_classification(
        file,
        text_column=text_column if text_column is not None else stored.get("text_column", "text"),
        label_column=label_column if label_column is not None else stored.get("label_column", "label"),
        labels=LabelVocabulary(classifier.label_names),
        format=format if format is not None else None,
        label_separator=label_separator if label_separator is not None else stored.get("label_separator") or ",",
    )
