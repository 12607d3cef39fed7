"""Train, validation and test splits for classification, including splits held out of a training
file by a seeded random draw (reproducible, so evaluation finds the same held-out rows later).

Known corpora (:func:`corpus_splits`):

- ``nsmc``: only ``ratings_train`` is shipped, so ``test`` (10,000 rows) and then ``valid``
  (5,000 rows) are held out of it; ``train`` is the rest.
- ``goemotions``: ``valid`` (10% of train.tsv, at most 5,000 rows) is held out of train.tsv for
  model selection and threshold tuning; ``dev`` is dev.tsv, never used in training, and ``test``
  is test.tsv when present.

A :class:`SplitRecipe` says how the splits were made; it is stored in the model's ``config.json``
so ``transformer classify evaluate --data NAME --split test`` rebuilds exactly the same rows.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from transformer.data.classification import ClassificationData, read_classification
from transformer.data.corpora import load_classification_corpus
from transformer.data.labels import LabelVocabulary
from transformer.errors import InputError

DEFAULT_SEED = 1234
VALID_FRACTION = 0.1
MAX_VALID = 5000
# corpus -> (held-out test rows, held-out validation rows or None for the default)
CORPUS_HOLDOUTS: dict[str, tuple[int, int | None]] = {
    "nsmc": (10_000, 5_000),
    "goemotions": (0, None),
}


@dataclass(frozen=True)
class SplitRecipe:
    """How splits were drawn: rows held out of the training file for ``test`` (first) and then
    ``valid``, by a permutation seeded with ``seed`` (0 rows: nothing held out)."""

    seed: int = DEFAULT_SEED
    test_size: int = 0
    valid_size: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SplitRecipe:
        return cls(**{k: int(data[k]) for k in ("seed", "test_size", "valid_size") if k in data})


def subset(data: ClassificationData, indices: Sequence[int], *, name: str) -> ClassificationData:
    """The rows ``indices`` of ``data`` (same label names) under a new ``name``."""
    return ClassificationData(
        [data.texts[i] for i in indices],
        [list(data.labels[i]) for i in indices],
        data.label_names,
        name=name,
    )


def default_valid_size(num_rows: int) -> int:
    """10% of the rows, at most 5,000 and at least 1 (0 for fewer than 2 rows)."""
    if num_rows < 2:
        return 0
    return max(1, min(MAX_VALID, int(num_rows * VALID_FRACTION)))


def hold_out(
    data: ClassificationData, recipe: SplitRecipe
) -> tuple[ClassificationData, ClassificationData | None, ClassificationData | None]:
    """``(train, valid, test)`` drawn from ``data`` by ``recipe`` (valid/test None when 0 rows).

    Each split keeps the file order of its rows. Raises InputError when ``data`` is too small.
    """
    n = len(data)
    held = recipe.test_size + recipe.valid_size
    if held and held >= n:
        raise InputError(
            f"{data.name}: {n} rows cannot give {recipe.test_size} test and {recipe.valid_size} "
            "validation rows and still leave training rows"
        )
    order = np.random.default_rng(recipe.seed).permutation(n)
    test_rows = np.sort(order[: recipe.test_size])
    valid_rows = np.sort(order[recipe.test_size : held])
    train_rows = np.sort(order[held:])
    base = data.name or "data"
    train = subset(data, train_rows.tolist(), name=f"{base} (train part)") if held else data
    valid = (
        subset(data, valid_rows.tolist(), name=f"{base} (held-out valid)")
        if recipe.valid_size
        else None
    )
    test = (
        subset(data, test_rows.tolist(), name=f"{base} (held-out test)")
        if recipe.test_size
        else None
    )
    return train, valid, test


def corpus_recipe(name: str, *, num_rows: int, seed: int = DEFAULT_SEED) -> SplitRecipe:
    """The default recipe of a known corpus with ``num_rows`` training rows."""
    test_size, valid_size = CORPUS_HOLDOUTS[name]
    if valid_size is None:
        valid_size = default_valid_size(num_rows - test_size)
    return SplitRecipe(seed=seed, test_size=test_size, valid_size=valid_size)


def corpus_splits(
    name: str, split: str | None = None, *, recipe: SplitRecipe | None = None
) -> dict[str, ClassificationData]:
    """The splits of a known corpus (see the module docstring), or only ``split`` when given.

    Returns ``{"train": ..., "valid": ..., "test": ...}`` (plus ``"dev"`` for GoEmotions; ``test``
    only when there is one). ``recipe`` defaults to :func:`corpus_recipe`. InputError for an
    unknown corpus or split, or missing files.
    """
    return _corpus_splits(name, split, recipe=recipe)[0]


def _corpus_splits(
    name: str, split: str | None, *, recipe: SplitRecipe | None, seed: int = DEFAULT_SEED
) -> tuple[dict[str, ClassificationData], SplitRecipe | None]:
    key = name.lower()
    if key not in CORPUS_HOLDOUTS:
        raise InputError(
            f"unknown classification corpus {name!r}: known are {', '.join(CORPUS_HOLDOUTS)}; "
            "pass --train/--valid files for any other"
        )
    known = ("train", "valid", "test", "dev") if key == "goemotions" else ("train", "valid", "test")
    if split is not None and split not in known:
        raise InputError(f"unknown {key} split {split!r}: expected one of {', '.join(known)}")
    if key == "goemotions" and split in ("dev", "test"):
        return {split: load_classification_corpus(key, split)}, recipe
    full = load_classification_corpus(key, "train")
    recipe = recipe or corpus_recipe(key, num_rows=len(full), seed=seed)
    train, valid, test = hold_out(full, recipe)
    out: dict[str, ClassificationData] = {"train": train}
    if valid is not None:
        out["valid"] = valid
    if test is not None:
        out["test"] = test
    if key == "goemotions" and split is None:
        out["dev"] = load_classification_corpus(key, "dev")
    if split is not None:
        if split not in out:
            raise InputError(f"{key} has no {split!r} split with this recipe")
        return {split: out[split]}, recipe
    return out, recipe


def file_splits(
    train: str | os.PathLike[str],
    *,
    valid: str | os.PathLike[str] | None = None,
    test: str | os.PathLike[str] | None = None,
    text_column: str | int = "text",
    label_column: str | int = "label",
    labels: LabelVocabulary | Sequence[str] | None = None,
    format: str | None = None,
    label_separator: str = ",",
    seed: int = DEFAULT_SEED,
) -> tuple[dict[str, ClassificationData], SplitRecipe]:
    """Splits from files: ``train`` (its labels fix the vocabulary unless ``labels`` is given),
    ``valid`` and ``test`` read with that vocabulary (an unknown label there is an InputError naming
    file and line). Without ``valid``, a validation split is held out of ``train``."""
    options: dict[str, Any] = dict(
        text_column=text_column,
        label_column=label_column,
        format=format,
        label_separator=label_separator,
    )
    train_data = read_classification(train, labels=labels, **options)
    vocab = LabelVocabulary(train_data.label_names)
    out: dict[str, ClassificationData] = {}
    recipe = SplitRecipe(seed=seed)
    if valid is None:
        recipe = SplitRecipe(seed=seed, valid_size=default_valid_size(len(train_data)))
        train_data, held, _ = hold_out(train_data, recipe)
        if held is not None:
            out["valid"] = held
    else:
        out["valid"] = read_classification(valid, labels=vocab, **options)
    out["train"] = train_data
    if test is not None:
        out["test"] = read_classification(test, labels=vocab, **options)
    return out, recipe


def resolve_splits(
    *,
    data: str | None = None,
    train: str | os.PathLike[str] | None = None,
    valid: str | os.PathLike[str] | None = None,
    test: str | os.PathLike[str] | None = None,
    text_column: str | int = "text",
    label_column: str | int = "label",
    format: str | None = None,
    label_separator: str = ",",
    seed: int = DEFAULT_SEED,
) -> tuple[dict[str, ClassificationData], SplitRecipe, dict[str, Any]]:
    """The splits of a known corpus (``data``) or of files (``train``, optional ``valid``/``test``),
    the recipe of what was held out, and a JSON-ready note of where the data came from (stored in
    ``config.json`` so evaluation can read the same way)."""
    if (data is None) == (train is None):
        raise InputError("give either a corpus name (--data) or a training file (--train), not both")
    if data is not None:
        if valid is not None or test is not None:
            raise InputError("--valid and --test files go with --train, not with --data")
        splits, recipe = _corpus_splits(data, None, recipe=None, seed=seed)
        assert recipe is not None
        return splits, recipe, {"name": data.lower()}
    splits, recipe = file_splits(
        train, valid=valid, test=test, text_column=text_column, label_column=label_column,
        format=format, label_separator=label_separator, seed=seed,
    )
    info = {"train": str(train), "valid": None if valid is None else str(valid),
            "test": None if test is None else str(test), "text_column": text_column,
            "label_column": label_column, "format": format, "label_separator": label_separator}
    return splits, recipe, info
