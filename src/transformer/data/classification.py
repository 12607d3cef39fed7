"""Text classification data: TSV, CSV or JSONL files with a text column and one or more labels.

Shapes: B texts in a batch, S longest text, C labels.

A label cell holds one label or several separated by commas, each a label name or an integer id
(``"joy,love"`` or ``"17,18"``). The label vocabulary (:class:`LabelVocabulary`) fixes names and
ids; it is built from the training file when not given, saved with the model (``labels.json``)
and reused for every later file, where an unknown label is an error.

TSV is split on tabs with no quoting at all (GoEmotions and NSMC hold literal double quotes inside
their texts); CSV uses standard quoting; JSONL holds one object a line. Known corpora:
``goemotions`` (English Reddit comments, 28 emotions, multi-label) and ``nsmc`` (Korean movie
reviews, negative/positive).
"""

from __future__ import annotations

import csv
import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from transformer.data.corpora import data_roots, find_file
from transformer.data.text_files import atomic_write_bytes, iter_file_lines
from transformer.data.tokenizer import PAD_ID, Tokenizer
from transformer.errors import InputError

log = logging.getLogger(__name__)

FORMATS = ("tsv", "csv", "jsonl")
LABELS_FILE = "labels.json"
LABELS_FORMAT_VERSION = 1
ON_LONG = ("truncate", "filter")


# ---------------------------------------------------------------------- label vocabulary
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
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{path}: label vocabulary not found") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InputError(f"{path}: unreadable label vocabulary ({err})") from None
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


# ---------------------------------------------------------------------- reading files
@dataclass
class ClassificationData:
    """Texts with their label ids: ``labels[i]`` lists the ids of ``texts[i]`` (one id for
    single-label data, any number for multi-label data)."""

    texts: list[str]
    labels: list[list[int]]
    label_names: tuple[str, ...]
    name: str = ""
    num_empty_dropped: int = 0

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.labels):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} label lists")

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def multi_label(self) -> bool:
        """True when some text has other than exactly one label."""
        return any(len(ids) != 1 for ids in self.labels)

    @property
    def vocabulary(self) -> LabelVocabulary:
        return LabelVocabulary(self.label_names)


def _detect_format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    suffix = suffixes[-1] if suffixes else ""
    if suffix in (".tsv", ".txt", ".tab"):
        return "tsv"
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    raise InputError(f"{path}: cannot tell the format from the name; pass format= one of {FORMATS}")


def _rows_delimited(path: Path, fmt: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a TSV (no quoting) or CSV (standard quoting) file, blank lines
    skipped."""
    lines = iter_file_lines(path)
    if fmt == "tsv":
        for number, text in lines:
            if text.strip():
                yield number, text.split("\t")
        return
    reader = csv.reader(text + "\n" for _, text in lines)
    try:
        for fields in reader:
            if fields and any(f.strip() for f in fields):
                yield reader.line_num, fields
    except csv.Error as err:
        raise InputError(f"{path}, line {reader.line_num}: bad CSV ({err})") from None


def _column_index(column: str | int, header: list[str] | None, *, path: Path, role: str) -> int:
    if isinstance(column, int):
        if column < 0:
            raise ValueError(f"{role} must be a column name or a non-negative index, got {column}")
        return column
    if header is None:
        raise ValueError(f"{role}={column!r} is a name but the file is read without a header")
    if column not in header:
        raise InputError(
            f"{path}, line 1: no {role.replace('_', ' ')} {column!r} in the header "
            f"(columns: {', '.join(repr(h) for h in header)})"
        )
    return header.index(column)


def _split_labels(cell: object, *, separator: str) -> list[str]:
    if isinstance(cell, list):
        return [str(c).strip() for c in cell]
    if isinstance(cell, bool) or cell is None:
        return [] if cell is None else [str(cell).lower()]
    cell = str(cell).strip()
    if separator not in cell:
        return [cell] if cell else []
    return [t.strip() for t in cell.split(separator) if t.strip()]


def _raw_rows(
    path: Path,
    fmt: str,
    *,
    text_column: str | int,
    label_column: str | int | None,
    has_header: bool | None,
    separator: str,
) -> Iterator[tuple[int, str, list[str]]]:
    """(line number, text, label tokens) for every row."""
    if fmt == "jsonl":
        if not isinstance(text_column, str) or not (
            label_column is None or isinstance(label_column, str)
        ):
            raise ValueError("JSONL columns must be given as key names")
        for number, line in iter_file_lines(path):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{path}, line {number}: not valid JSON ({err.msg})") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}, line {number}: expected a JSON object")
            for key in (text_column, label_column):
                if key is not None and key not in obj:
                    raise InputError(
                        f"{path}, line {number}: no key {key!r} (keys: {', '.join(map(repr, obj))})"
                    )
            text = obj[text_column]
            if not isinstance(text, str):
                raise InputError(f"{path}, line {number}: {text_column!r} is not a string")
            labels = (
                []
                if label_column is None
                else _split_labels(obj[label_column], separator=separator)
            )
            yield number, text, labels
        return
    if has_header is None:
        has_header = isinstance(text_column, str) or isinstance(label_column, str)
    rows = _rows_delimited(path, fmt)
    header: list[str] | None = None
    width: int | None = None
    if has_header:
        first = next(rows, None)
        if first is None:
            raise InputError(f"{path}: no header line")
        header = [h.strip() for h in first[1]]
        width = len(header)
    text_index = _column_index(text_column, header, path=path, role="text_column")
    label_index = (
        None
        if label_column is None
        else _column_index(label_column, header, path=path, role="label_column")
    )
    needed = max(text_index, label_index if label_index is not None else 0) + 1
    sep_name = "tab" if fmt == "tsv" else "comma"
    for number, fields in rows:
        if width is None:
            width = len(fields)
            if width < needed:
                raise InputError(
                    f"{path}, line {number}: {width} {sep_name}-separated fields, but column "
                    f"{needed - 1} is needed (columns count from 0)"
                )
        if len(fields) != width:
            raise InputError(
                f"{path}, line {number}: {len(fields)} {sep_name}-separated fields, expected "
                f"{width} (ragged row)"
            )
        labels = (
            [] if label_index is None else _split_labels(fields[label_index], separator=separator)
        )
        yield number, fields[text_index], labels


def _build_vocabulary(tokens: set[str]) -> LabelVocabulary:
    if tokens and all(t.isascii() and t.isdigit() for t in tokens):
        return LabelVocabulary(tuple(str(i) for i in range(max(int(t) for t in tokens) + 1)))
    return LabelVocabulary(tuple(sorted(tokens)))


def read_classification(
    path: str | os.PathLike[str],
    *,
    text_column: str | int = "text",
    label_column: str | int | None = "label",
    labels: LabelVocabulary | Sequence[str] | None = None,
    format: str | None = None,
    has_header: bool | None = None,
    label_separator: str = ",",
) -> ClassificationData:
    """Read a classification file into texts and label ids.

    ``format`` is "tsv", "csv" or "jsonl" (default: from the suffix, ``.gz`` allowed; ``.txt`` is
    TSV). Columns are header names or 0-based indices; ``has_header`` defaults to "a column is
    given by name". ``label_column=None`` reads texts only (labels are then empty lists).
    ``labels`` fixes the vocabulary (names in id order); without it the vocabulary is every label
    in the file, sorted (or ``"0".."max"`` when all labels are integers). Rows whose text is empty
    are dropped and counted. Raises :class:`InputError` naming the file and line for an unknown
    label, a missing column or key, a ragged row, a row without a label, bad JSON or bad UTF-8.
    """
    path = Path(path)
    fmt = format or _detect_format(path)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if not label_separator:
        raise ValueError("label_separator must be non-empty")
    rows = list(
        _raw_rows(
            path,
            fmt,
            text_column=text_column,
            label_column=label_column,
            has_header=has_header,
            separator=label_separator,
        )
    )
    if label_column is not None:
        for number, _, tokens in rows:
            if not tokens:
                raise InputError(f"{path}, line {number}: no label")
    if labels is None:
        vocab = (
            _build_vocabulary({t for _, _, tokens in rows for t in tokens})
            if label_column is not None and rows
            else None
        )
    else:
        vocab = labels if isinstance(labels, LabelVocabulary) else LabelVocabulary(tuple(labels))
    texts: list[str] = []
    label_ids: list[list[int]] = []
    dropped = 0
    for number, text, tokens in rows:
        ids: list[int] = []
        for token in tokens:
            i = vocab.id_of(token) if vocab is not None else None
            if i is None:
                known = ", ".join(vocab.names[:12]) + (", ..." if len(vocab) > 12 else "")
                raise InputError(f"{path}, line {number}: unknown label {token!r} (known: {known})")
            if i not in ids:
                ids.append(i)
        if not text.strip():
            dropped += 1
            continue
        texts.append(text.strip())
        label_ids.append(ids)
    if not texts:
        raise InputError(f"{path}: no row with text")
    if dropped:
        log.warning("%s: dropped %d rows with empty text", path, dropped)
    return ClassificationData(
        texts,
        label_ids,
        vocab.names if vocab is not None else (),
        name=str(path),
        num_empty_dropped=dropped,
    )


# ---------------------------------------------------------------------- named corpora
CLASSIFICATION_CORPORA = ("goemotions", "nsmc")
_CLASSIFICATION_SPLITS = {
    "goemotions": {"train": "train.tsv.gz", "dev": "dev.tsv.gz", "test": "test.tsv.gz"},
    "nsmc": {"train": "ratings_train.txt.gz", "test": "ratings_test.txt.gz"},
}
_CLASSIFICATION_ALIASES = {"valid": "dev", "validation": "dev", "val": "dev"}
NSMC_LABELS = ("negative", "positive")


def load_classification_corpus(
    name: str, split: str, *, roots: Sequence[Path] | None = None
) -> ClassificationData:
    """A known classification corpus, found like the translation corpora (see
    :mod:`transformer.data.corpora`): ``goemotions`` (splits train, dev; test when present) with
    its 28 emotion names from ``emotions.txt``, multi-label; ``nsmc`` (train; test when present),
    labels ``negative``/``positive`` (ids 0/1). Raises :class:`InputError` for an unknown name or
    split and for missing files (saying where to put them)."""
    key = name.lower()
    if key not in CLASSIFICATION_CORPORA:
        raise InputError(
            f"unknown classification corpus {name!r}: known are {', '.join(CLASSIFICATION_CORPORA)}; "
            "pass a TSV/CSV/JSONL file for any other"
        )
    split = _CLASSIFICATION_ALIASES.get(split, split)
    files = _CLASSIFICATION_SPLITS[key]
    if split not in files:
        raise InputError(f"unknown {key} split {split!r}: expected one of {', '.join(files)}")
    path = find_file(key, files[split], roots=roots)
    if path is None:
        searched = ", ".join(str(r) for r in (data_roots() if roots is None else roots))
        raise InputError(
            f"{key} {split} not found (searched {searched}): put {files[split]} (or the same "
            f"without .gz) in a {key}/ folder under $TRANSFORMER_DATA, or pass the file path"
        )
    if key == "goemotions":
        names_path = path.parent / "emotions.txt"
        if not names_path.is_file():
            found = find_file(key, "emotions.txt", roots=roots)
            if found is None:
                raise InputError(f"{names_path}: GoEmotions label names (emotions.txt) not found")
            names_path = found
        vocab = LabelVocabulary.from_names_file(names_path)
        data = read_classification(path, text_column=0, label_column=1, labels=vocab, format="tsv")
    else:
        data = read_classification(
            path, text_column="document", label_column="label", labels=NSMC_LABELS, format="tsv"
        )
    data.name = f"{key}/{split}"
    return data


# ---------------------------------------------------------------------- encoding and batches
@dataclass
class EncodedTexts(Sequence[tuple[list[int], list[int]]]):
    """Token ids with their label ids, a sequence of ``(ids, label_ids)`` a DataLoader can index,
    plus what encoding did to fit ``max_len``."""

    items: list[tuple[list[int], list[int]]]
    max_len: int
    num_truncated: int = 0
    num_filtered: int = 0

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):  # type: ignore[override]
        return self.items[index]

    def __iter__(self):  # type: ignore[override]
        return iter(self.items)

    @property
    def lengths(self) -> list[int]:
        """Tokens per text: the widths :class:`TokenBatchSampler` budgets by."""
        return [len(ids) for ids, _ in self.items]


def encode_classification(
    data: ClassificationData, tokenizer: Tokenizer, *, max_len: int, on_long: str = "truncate"
) -> EncodedTexts:
    """Tokenize texts so that none is longer than ``max_len`` tokens (for a CLS-pooling model
    pass ``model.max_tokens``). Longer texts are truncated or dropped (``on_long``), counted and
    logged."""
    if on_long not in ON_LONG:
        raise ValueError(f"on_long must be one of {ON_LONG}, got {on_long!r}")
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
    items: list[tuple[list[int], list[int]]] = []
    truncated = filtered = 0
    for ids, labels in zip(tokenizer.encode_batch(data.texts), data.labels, strict=True):
        if len(ids) > max_len:
            if on_long == "filter":
                filtered += 1
                continue
            truncated += 1
            ids = ids[:max_len]
        items.append((ids, labels))
    if truncated:
        log.warning(
            "%s: truncated %d of %d texts to %d tokens", data.name, truncated, len(data), max_len
        )
    if filtered:
        log.warning(
            "%s: dropped %d of %d texts longer than %d tokens",
            data.name,
            filtered,
            len(data),
            max_len,
        )
    return EncodedTexts(items, max_len=max_len, num_truncated=truncated, num_filtered=filtered)


@dataclass
class ClassificationBatch:
    """Padded token ids and their targets."""

    tokens: Tensor  # (B, S) long, right-padded with the pad id
    targets: Tensor  # (B,) long class ids, or (B, C) float 0/1 for multi-label

    def __len__(self) -> int:
        return self.tokens.size(0)

    def to(self, device: torch.device | str) -> ClassificationBatch:
        return ClassificationBatch(
            self.tokens.to(device, non_blocking=True), self.targets.to(device, non_blocking=True)
        )


def collate_classification(
    items: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    num_labels: int,
    multi_label: bool,
    pad_id: int = PAD_ID,
) -> ClassificationBatch:
    """Pad ``(ids, label_ids)`` items into a :class:`ClassificationBatch`: single-label targets
    are the (B,) class ids (each item must have exactly one), multi-label targets a (B, C) 0/1
    float matrix. Bind the keywords with ``functools.partial`` to use it as a ``collate_fn``."""
    if not items:
        raise ValueError("cannot collate an empty list of items")
    tokens = np.full(
        (len(items), max(len(ids) for ids, _ in items)), pad_id, dtype=np.int64
    )  # (B, S)
    for row, (ids, _) in enumerate(items):
        tokens[row, : len(ids)] = ids
    if multi_label:
        targets = torch.zeros(len(items), num_labels)  # (B, C)
        for row, (_, labels) in enumerate(items):
            targets[row, list(labels)] = 1.0
    else:
        if any(len(labels) != 1 for _, labels in items):
            bad = next(i for i, (_, labels) in enumerate(items) if len(labels) != 1)
            raise ValueError(
                f"single-label collation needs exactly one label per text; item {bad} has "
                f"{len(items[bad][1])} (use multi_label=True)"
            )
        targets = torch.tensor([labels[0] for _, labels in items], dtype=torch.long)  # (B,)
    return ClassificationBatch(torch.from_numpy(tokens), targets)
