"""Text in, labels out: a trained classifier read from its model directory, beside the
:class:`~transformer.inference.translator.Translator`.

Shapes: N texts, B texts in a batch, S longest text in it, C labels.

    clf = load_classifier("runs/nsmc")          # transformer.inference.loader
    out = clf.predict(["재밌어요", "별로"])      # out.probs (N, C), out.chosen (N, C) bool
    # scores: transformer.inference.classifier_eval.evaluate_classifier(clf, data)

Texts longer than the model's limit are truncated (and counted); an empty text is kept and gets
whatever the model predicts for no tokens at all (counted too), so the outputs line up with the
inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from transformer.data.padding import pad_rows
from transformer.errors import InputError
from transformer.evaluation.label_metrics import decide
from transformer.model_dir import LoadedModel


def probabilities(logits: Tensor, *, multi_label: bool) -> Tensor:
    """Logits (N, C) -> per-label sigmoid (multi-label) or softmax over labels (single-label)."""
    return torch.sigmoid(logits.float()) if multi_label else torch.softmax(logits.float(), dim=-1)


@torch.inference_mode()
def predict_logits(
    model: nn.Module, ids: Sequence[Sequence[int]], *, batch_tokens: int = 16384, max_sentences: int = 512
) -> Tensor:
    """Logits (N, C) float32 on the CPU for token id lists, in input order.

    Inputs are run in batches of similar length (at most ``batch_tokens`` padded positions and
    ``max_sentences`` rows) in eval mode; the model's training mode is restored afterwards.
    """
    device = next(model.parameters()).device
    pad_id = model.config.pad_id
    out = torch.zeros(len(ids), model.num_labels)  # (N, C)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    was_training = model.training
    model.eval()
    try:
        start = 0
        while start < len(order):
            longest = max(len(ids[order[min(start + max_sentences, len(order)) - 1]]), 1)
            size = max(1, min(max_sentences, batch_tokens // longest))
            chunk = order[start : start + size]
            tokens = pad_rows([ids[i] for i in chunk], pad_id=pad_id).to(device)  # (B, S)
            out[chunk] = model(tokens).float().cpu()  # (B, C)
            start += size
    finally:
        model.train(was_training)
    return out


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
    (multi-label) decision thresholds, as :func:`~transformer.model_dir.load_model_dir` read them
    (:func:`transformer.inference.loader.load_classifier` reads and checks a directory)."""

    def __init__(self, loaded: LoadedModel) -> None:
        record = loaded.record
        if record.classifier is None:
            raise InputError(f"{record.source}: task is {record.task!r}, not a classifier")
        self.model = loaded.model
        self.tokenizer = loaded.src_tokenizer
        self.record = record
        self.label_names = record.labels
        self.multi_label = bool(self.model.multi_label)
        self.thresholds: np.ndarray | None = (
            np.asarray(record.thresholds, dtype=np.float64) if record.thresholds is not None else None)
        self.precision = "fp32"  # what it runs in (transformer.inference.loader.classifier_for)

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
