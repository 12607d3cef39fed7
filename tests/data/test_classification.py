"""Classification files: TSV/CSV/JSONL, label names and ids, bad rows (the label vocabulary:
test_labels.py; GoEmotions and NSMC by name: test_corpora.py)."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

from transformer.data.classification import read_classification
from transformer.errors import InputError


def write(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
    return path


def message(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


def test_tsv_with_header_and_multi_label_names(tmp_path: Path) -> None:
    path = write(
        tmp_path / "d.tsv",
        'text\tlabel\n"Quoted" start, and more\tjoy,love\nplain\tanger\nboth "x\tjoy\n',
    )
    data = read_classification(path)
    # quotes are text (no CSV quoting in TSV)
    assert data.texts == ['"Quoted" start, and more', "plain", 'both "x']
    assert data.label_names == ("anger", "joy", "love")  # sorted when built from the file
    assert data.labels == [[1, 2], [0], [1]]
    assert data.multi_label and data.num_labels == 3


def test_integer_labels_and_given_vocabulary(tmp_path: Path) -> None:
    path = write(tmp_path / "d.tsv.gz", "good\t1\nbad\t0\nok\t1\n")
    data = read_classification(path, text_column=0, label_column=1)
    assert data.label_names == ("0", "1") and data.labels == [[1], [0], [1]]
    assert not data.multi_label
    named = read_classification(path, text_column=0, label_column=1, labels=["neg", "pos"])
    assert named.label_names == ("neg", "pos") and named.labels == [[1], [0], [1]]


def test_csv_with_quoting(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", 'id,text,label\n1,"Hello, ""world""",a\n2,bye,"a,b"\n')
    data = read_classification(path)
    assert data.texts == ['Hello, "world"', "bye"]
    assert data.labels == [[0], [0, 1]]


def test_jsonl(tmp_path: Path) -> None:
    lines = [
        {"text": "one", "label": ["x", "y"]},
        {"text": "two", "label": "y"},
        {"text": "three", "label": 0},
    ]
    path = write(tmp_path / "d.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    data = read_classification(path, labels=["x", "y"])
    assert data.labels == [[0, 1], [1], [0]]


def test_empty_texts_are_dropped_and_counted(tmp_path: Path, caplog) -> None:
    path = write(tmp_path / "d.tsv", "a\t0\n \t1\nb\t1\n")
    with caplog.at_level(logging.WARNING):
        data = read_classification(path, text_column=0, label_column=1)
    assert (data.texts, data.num_empty_dropped) == (["a", "b"], 1)
    assert "dropped 1 rows with empty text" in caplog.text


def test_texts_only(tmp_path: Path) -> None:
    path = write(tmp_path / "d.tsv", "text\nhello\nworld\n")
    data = read_classification(path, label_column=None, labels=["a", "b"])
    assert data.texts == ["hello", "world"] and data.labels == [[], []]


def test_unknown_label_names_file_line_and_label(tmp_path: Path) -> None:
    path = write(tmp_path / "d.tsv", "text\tlabel\nfine\tjoy\nodd\tjoy,glee\n")
    with pytest.raises(InputError) as err:
        read_classification(path, labels=["joy", "anger"])
    assert message(err) == f"{path}, line 3: unknown label 'glee' (known: joy, anger)"
    with pytest.raises(InputError, match="line 1: unknown label '7'"):
        read_classification(
            write(tmp_path / "e.tsv", "x\t7\n"), text_column=0, label_column=1, labels=["a"]
        )


def test_missing_column(tmp_path: Path) -> None:
    path = write(tmp_path / "d.tsv", "id\tdocument\tlabel\n1\thi\t0\n")
    with pytest.raises(InputError) as err:
        read_classification(path, text_column="text")
    assert message(err) == (
        f"{path}, line 1: no text column 'text' in the header (columns: 'id', 'document', 'label')"
    )
    with pytest.raises(InputError, match="line 1: 2 tab-separated fields, but column 4 is needed"):
        read_classification(write(tmp_path / "e.tsv", "a\tb\n"), text_column=0, label_column=4)
    with pytest.raises(InputError, match="line 2: no key 'label'"):
        read_classification(
            write(tmp_path / "f.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n')
        )


def test_ragged_rows(tmp_path: Path) -> None:
    path = write(tmp_path / "d.tsv", "text\tlabel\nok\t1\ntoo\tmany\t1\n")
    with pytest.raises(InputError) as err:
        read_classification(path)
    assert message(err) == f"{path}, line 3: 3 tab-separated fields, expected 2 (ragged row)"
    no_header = write(tmp_path / "e.csv", "a,1\nb\n")
    with pytest.raises(InputError, match="line 2: 1 comma-separated fields, expected 2"):
        read_classification(no_header, text_column=0, label_column=1)


def test_other_bad_rows(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="line 2: no label"):
        read_classification(write(tmp_path / "a.tsv", "x\t1\ny\t\n"), text_column=0, label_column=1)
    with pytest.raises(InputError, match="line 1: not valid JSON"):
        read_classification(write(tmp_path / "b.jsonl", "{oops\n"))
    with pytest.raises(InputError, match="cannot tell the format"):
        read_classification(write(tmp_path / "c.xml", "<x/>"))
    with pytest.raises(InputError, match="file is empty"):
        read_classification(write(tmp_path / "d.tsv", ""))
    (tmp_path / "e.tsv").write_bytes(b"text\tlabel\nd\xe9j\xe0\t1\n")
    with pytest.raises(InputError, match=r"line 2: not valid UTF-8 \(byte 0xe9 at byte offset 12"):
        read_classification(tmp_path / "e.tsv")
