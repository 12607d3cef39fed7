"""Text classification data: TSV, CSV or JSONL files with a text column and one or more labels.

A label cell holds one label or several separated by commas, each a label name or an integer id
(``"joy,love"`` or ``"17,18"``). The label vocabulary (:class:`LabelVocabulary`) fixes names and
ids (:mod:`transformer.data.labels`); it is built from the training file when not given, saved with
the model (``labels.json``) and reused for every later file, where an unknown label is an error.

TSV is split on tabs with no quoting at all (GoEmotions and NSMC hold literal double quotes inside
their texts); CSV uses standard quoting; JSONL holds one object a line. The named corpora
(GoEmotions, NSMC) are in :mod:`transformer.data.corpora`; encoding in
:mod:`transformer.data.encoding` and batches in :mod:`transformer.data.collation`.
"""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from transformer.data.labels import LabelVocabulary
from transformer.data.text_files import iter_file_lines, json_object
from transformer.errors import InputError

log = logging.getLogger(__name__)

FORMATS = ("tsv", "csv", "jsonl")


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
            raise InputError(f"{path}: JSONL columns must be given as key names, got "
                             f"{text_column!r} and {label_column!r}")
        for number, line in iter_file_lines(path):
            if not line.strip():
                continue
            obj = json_object(line, path=path, number=number)
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
    if width is not None and width < needed:
        raise InputError(f"{path}: the header has {width} {sep_name}-separated columns, but column "
                         f"{needed - 1} is needed (columns count from 0)")
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


MAX_LABEL_ID = 99_999  # integer labels make a vocabulary of every id up to the largest


def _build_vocabulary(tokens: set[str], *, path: Path) -> LabelVocabulary:
    try:
        if tokens and all(t.isascii() and t.isdigit() for t in tokens):
            largest = max(int(t) for t in tokens)
            if largest > MAX_LABEL_ID:
                raise ValueError(f"label id {largest} is too large (integer labels are ids "
                                 f"0..{MAX_LABEL_ID}, and every id up to the largest is a label)")
            return LabelVocabulary(tuple(str(i) for i in range(largest + 1)))
        return LabelVocabulary(tuple(sorted(tokens)))
    except ValueError as err:
        raise InputError(f"{path}: {err}") from None


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
            _build_vocabulary({t for _, _, tokens in rows for t in tokens}, path=path)
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
