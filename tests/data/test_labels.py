"""The label vocabulary: names in id order, saved with the model and read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer.data.labels import LabelVocabulary
from transformer.errors import InputError


def test_label_vocabulary_save_load(tmp_path: Path) -> None:
    vocab = LabelVocabulary(("기쁨", "anger", "0"))
    path = vocab.save(tmp_path)
    assert path == tmp_path / "labels.json"
    assert LabelVocabulary.load(tmp_path) == vocab == LabelVocabulary.load(path)
    assert vocab.id_of("anger") == 1 and vocab.id_of("2") == 2 and vocab.id_of("nope") is None
    with pytest.raises(InputError, match="label vocabulary not found"):
        LabelVocabulary.load(tmp_path / "missing.json")
    (tmp_path / "labels.json").write_text('{"format_version": 1, "labels": ["a", "a"]}')
    with pytest.raises(InputError, match="appears twice"):
        LabelVocabulary.load(tmp_path)
    with pytest.raises(ValueError, match="commas"):
        LabelVocabulary(("a,b",))
