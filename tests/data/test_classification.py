"""Classification files: TSV/CSV/JSONL, label names and ids, the label vocabulary, bad rows, and
the real GoEmotions and NSMC files."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest
import torch

from transformer.data.batching import collate_classification, encode_classification
from transformer.data.classification import ClassificationData, read_classification
from transformer.data.corpora import load_classification_corpus
from transformer.data.labels import LabelVocabulary
from transformer.data.tokenizer import PAD_ID, Tokenizer
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


def test_encode_and_collate(tmp_path: Path) -> None:
    tok = Tokenizer.train(["good movie", "bad film", "great plot"] * 5, vocab_size=285)
    data = ClassificationData(["good movie " * 20, "bad"], [[1], [0]], ("neg", "pos"))
    encoded = encode_classification(data, tok, max_len=8)
    assert encoded.num_truncated == 1 and max(encoded.lengths) == 8
    assert len(encode_classification(data, tok, max_len=8, on_long="filter")) == 1
    batch = collate_classification(list(encoded), num_labels=2, multi_label=False)
    assert batch.tokens.shape == (2, 8) and batch.tokens[1, -1] == PAD_ID
    assert batch.targets.tolist() == [1, 0]
    multi = collate_classification([([5], [0, 2]), ([6, 7], [])], num_labels=3, multi_label=True)
    assert torch.equal(multi.targets, torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="exactly one label"):
        collate_classification([([5], [0, 1])], num_labels=2, multi_label=False)


def test_unknown_corpus_and_split(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown classification corpus 'imdb'"):
        load_classification_corpus("imdb", "train")
    with pytest.raises(InputError, match="unknown nsmc split 'dev'"):
        load_classification_corpus("nsmc", "dev")
    with pytest.raises(InputError, match="goemotions test not found .* put test.tsv.gz"):
        load_classification_corpus("goemotions", "test", roots=[tmp_path])


def test_real_goemotions(shared_data: Path) -> None:
    """GoEmotions dev (Demszky et al., 2020): 5,426 comments, 28 labels, some with several."""
    data = load_classification_corpus("goemotions", "dev", roots=[shared_data])
    assert len(data) == 5426 and data.num_labels == 28
    assert data.label_names[0] == "admiration" and data.label_names[27] == "neutral"
    assert data.multi_label and max(len(ids) for ids in data.labels) >= 3
    assert data.texts[0] == "Is this in New Orleans?? I really feel like this is New Orleans."
    assert data.labels[0] == [27]  # neutral


def test_real_nsmc(shared_data: Path) -> None:
    """NSMC train: 150,000 reviews of which 5 are empty (its SOURCE.md), binary labels."""
    data = load_classification_corpus("nsmc", "train", roots=[shared_data])
    assert (len(data), data.num_empty_dropped) == (150_000 - 5, 5)
    assert data.label_names == ("negative", "positive") and not data.multi_label
    assert data.texts[0] == "아 더빙.. 진짜 짜증나네요 목소리" and data.labels[0] == [0]
    positives = sum(ids == [1] for ids in data.labels)
    assert 74_000 < positives < 75_000  # 74,827 positive rows before the 5 empty ones
