"""A classifier run's inputs: the training texts encoded and batched by token budget, the
validation texts encoded, and the multi-label positive weights; what
:mod:`~transformer.training.text_inputs` is for a translation run.

    inputs = classifier_inputs(splits, config, tokenizer=tok, max_len=model.max_tokens,
                               pad_id=0, num_labels=3, multi_label=False)
    trainer = Trainer(..., train_data=inputs.data, ...)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from transformer.config.runs import ClassifierTrainConfig
from transformer.data.classification import ClassificationData
from transformer.data.collation import collate_classification
from transformer.data.encoding import encode_classification
from transformer.data.epoch_batches import Epochs
from transformer.data.sampled_epochs import SampledEpochs
from transformer.data.tokenizer import Tokenizer
from transformer.errors import InputError


def positive_weights(labels: list[list[int]], *, num_labels: int, cap: float) -> torch.Tensor:
    """Per label sqrt(negatives / positives), clipped to [1, cap] (cap for a label never seen)."""
    counts = np.zeros(num_labels)
    for row in labels:
        counts[list(row)] += 1
    n = len(labels)
    ratio = np.where(counts > 0, (n - counts) / np.maximum(counts, 1), cap**2)
    return torch.tensor(np.clip(np.sqrt(ratio), 1.0, cap), dtype=torch.float32)


@dataclass
class ClassifierInputs:
    """What the run needs from its data: ``data`` (the Trainer's epochs), the validation ids and
    label lists, the multi-label positive weights (or None), and the training set's size and how
    many of its texts were truncated."""

    data: Epochs | SampledEpochs
    valid_ids: list[list[int]]
    valid_labels: list[list[int]]
    pos_weight: torch.Tensor | None
    train_examples: int
    train_truncated: int


def classifier_inputs(splits: dict[str, ClassificationData], config: ClassifierTrainConfig, *,
                      tokenizer: Tokenizer, max_len: int, pad_id: int, num_labels: int,
                      multi_label: bool, rank: int = 0, world_size: int = 1,
                      validation: bool = True) -> ClassifierInputs:
    """``splits["train"]`` encoded to ``max_len`` tokens in batches of ``config.batch_tokens``
    positions (this ``rank``'s share of each epoch's batches), and with ``validation`` (rank 0)
    ``splits["valid"]`` (when present) encoded. InputError for a text with other than one label
    when not ``multi_label``."""
    train_data, valid_data = splits["train"], splits.get("valid")
    encoded = encode_classification(train_data, tokenizer, max_len=max_len)
    ids = [item[0] for item in encoded]
    labels = [item[1] for item in encoded]
    valid_ids: list[list[int]] = []
    valid_labels: list[list[int]] = []
    if valid_data is not None and validation:
        valid_enc = encode_classification(valid_data, tokenizer, max_len=max_len)
        valid_ids = [item[0] for item in valid_enc]
        valid_labels = [item[1] for item in valid_enc]
    if not multi_label:
        bad = next((i for i, row in enumerate(labels) if len(row) != 1), None)
        if bad is not None:
            raise InputError(f"{train_data.name}: text {bad + 1} has {len(labels[bad])} labels but "
                             "the classifier is single-label (use multi-label)")
    pos_weight = None
    if multi_label and config.pos_weight == "sqrt":
        pos_weight = positive_weights(labels, num_labels=num_labels, cap=config.max_pos_weight)
    extra_positions = 1 if config.pooling == "cls" else 0  # the CLS vector's position
    collate = functools.partial(collate_classification, num_labels=num_labels,
                                multi_label=multi_label, pad_id=pad_id)
    data: Epochs | SampledEpochs = Epochs(
        list(zip(ids, labels, strict=True)),
        widths=[max(len(row), 1) + extra_positions for row in ids],
        collate=collate, max_tokens=config.batch_tokens, max_sentences=config.max_sentences,
        seed=config.seed, rank=rank, world_size=world_size,
    )
    if config.subword_sampling > 0:  # the training texts encoded anew each epoch
        if not hasattr(tokenizer, "sample_batch"):
            raise InputError("--subword-sampling needs a SentencePiece tokenizer; this run's is "
                             f"{type(tokenizer).__name__}")

        def encode(seed: int) -> tuple[list, list[int], int]:
            sampled = encode_classification(train_data, tokenizer, max_len=max_len,
                                            sampling=config.subword_sampling, seed=seed)
            widths = [max(len(row), 1) + extra_positions for row, _ in sampled]
            return list(sampled), widths, max(widths, default=1)

        data = SampledEpochs(encode, collate=collate, max_tokens=config.batch_tokens,
                             max_sentences=config.max_sentences, seed=config.seed, rank=rank,
                             world_size=world_size)
    return ClassifierInputs(data, valid_ids, valid_labels, pos_weight, train_examples=len(ids),
                            train_truncated=encoded.num_truncated)
