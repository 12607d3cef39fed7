"""Label vocabularies of classification data: label names in id order, saved with the model.

A vocabulary is built from the training file when not given, saved with the model
(``labels.json``) and reused for every later file, where an unknown label is an error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from transformer.atomic import atomic_write_bytes
from transformer.data.text_files import iter_file_lines, read_json
from transformer.errors import InputError

LABELS_FILE = "labels.json"
LABELS_FORMAT_VERSION = 1

@dataclass(frozen=True)
class LabelVocabulary:
    """Label names in id order: ``names[i]`` is label ``i``."""

    names: tuple[str, ...]

    def __post_init__(self) -> None:
        names = tuple(self.names)
        object.__setattr__(self, "names", names)
        if not names:
            raise ValueError("a label vocabulary needs at least one label")
        for name in names:
            if not isinstance(name, str) or not name.strip() or name != name.strip() or "," in name:
                raise ValueError(
                    f"label names must be non-empty strings without commas or surrounding spaces, "
                    f"got {name!r}"
                )
        if len(set(names)) != len(names):
            duplicate = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"label name {duplicate!r} appears twice")
        object.__setattr__(self, "_ids", {name: i for i, name in enumerate(names)})

    def __len__(self) -> int:
        return len(self.names)

    def id_of(self, token: str) -> int | None:
        """The id of a label name, or of an integer id written as text; None when unknown."""
        found = self._ids.get(token)  # type: ignore[attr-defined]
        if found is not None:
            return found
        if token.isascii() and token.isdigit() and int(token) < len(self.names):
            return int(token)
        return None

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``labels.json`` (``path`` is the file or the model directory holding it)."""
        path = Path(path)
        if path.is_dir() or not path.suffix:
            path = path / LABELS_FILE
        text = json.dumps(
            {"format_version": LABELS_FORMAT_VERSION, "labels": list(self.names)},
            ensure_ascii=False,
            indent=2,
        )
        atomic_write_bytes(path, (text + "\n").encode("utf-8"))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LabelVocabulary:
        """Read what :meth:`save` wrote (the file or its folder); InputError when missing or
        corrupt."""
        path = Path(path)
        if path.is_dir():
            path = path / LABELS_FILE
        data = read_json(path, what="label vocabulary", missing="label vocabulary not found")
        if (
            not isinstance(data, dict)
            or data.get("format_version") != LABELS_FORMAT_VERSION
            or not isinstance(data.get("labels"), list)
        ):
            raise InputError(
                f"{path}: not a label vocabulary (expected format_version "
                f"{LABELS_FORMAT_VERSION} and a 'labels' list)"
            )
        try:
            return cls(tuple(data["labels"]))
        except ValueError as err:
            raise InputError(f"{path}: {err}") from None

    @classmethod
    def from_names_file(cls, path: str | os.PathLike[str]) -> LabelVocabulary:
        """One label name a line (like GoEmotions' ``emotions.txt``); blank lines are skipped."""
        names = [text.strip() for _, text in iter_file_lines(path) if text.strip()]
        try:
            return cls(tuple(names))
        except ValueError as err:
            raise InputError(f"{path}: {err}") from None
