"""Held-out classification splits: disjoint, reproducible from their recipe, file order kept."""

from __future__ import annotations

import pytest

from transformer.data.classification import ClassificationData
from transformer.data.classification_splits import (
    SplitRecipe,
    corpus_splits,
    default_valid_size,
    file_splits,
    hold_out,
)
from transformer.errors import InputError


def numbered(n: int) -> ClassificationData:
    return ClassificationData([f"text {i}" for i in range(n)], [[i % 2] for i in range(n)], ("a", "b"), name="toy")


def test_hold_out_is_disjoint_complete_ordered_and_reproducible():
    data = numbered(100)
    recipe = SplitRecipe(seed=7, test_size=20, valid_size=10)
    train, valid, test = hold_out(data, recipe)
    parts = [train.texts, valid.texts, test.texts]
    assert [len(p) for p in parts] == [70, 10, 20]
    assert sorted(t for p in parts for t in p) == sorted(data.texts)
    for part in parts:
        assert part == sorted(part, key=lambda t: int(t.split()[1]))  # file order kept
    again = hold_out(data, SplitRecipe.from_dict(recipe.to_dict()))
    assert again[1].texts == valid.texts and again[2].texts == test.texts
    other = hold_out(data, SplitRecipe(seed=8, test_size=20, valid_size=10))
    assert other[2].texts != test.texts
    assert test.labels == [[int(t.split()[1]) % 2] for t in test.texts]  # labels follow their texts


def test_hold_out_refuses_to_leave_nothing_for_training():
    with pytest.raises(InputError, match="toy"):
        hold_out(numbered(10), SplitRecipe(test_size=5, valid_size=5))


def test_default_valid_size():
    assert default_valid_size(1) == 0
    assert default_valid_size(30) == 3
    assert default_valid_size(1_000_000) == 5000


def test_file_splits_hold_out_validation_when_no_file_is_given(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"t{i}\t{'x' if i % 2 else 'y'}\n" for i in range(50)))
    splits, recipe = file_splits(train)
    assert recipe.valid_size == 5 and len(splits["valid"]) == 5 and len(splits["train"]) == 45
    assert splits["valid"].label_names == ("x", "y")


def test_nsmc_splits_are_disjoint_and_stable(shared_data, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA", str(shared_data))
    splits = corpus_splits("nsmc")
    sizes = {k: len(v) for k, v in splits.items()}
    assert sizes["test"] == 10_000 and sizes["valid"] == 5_000 and sizes["train"] > 100_000
    test_again = corpus_splits("nsmc", "test")["test"]
    assert test_again.texts == splits["test"].texts and test_again.labels == splits["test"].labels
    assert splits["test"].label_names == ("negative", "positive")
