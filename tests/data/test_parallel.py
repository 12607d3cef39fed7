"""Reading parallel text: plain and gzip, alignment, and one-line errors for bad files."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import pytest

from transformer.data.parallel import ParallelCorpus, read_lines, read_parallel
from transformer.data.text_files import iter_file_lines
from transformer.errors import InputError


def write(path: Path, text: str | bytes, *, gz: bool = False) -> Path:
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def test_plain_and_gzip_read_the_same(tmp_path: Path) -> None:
    text = "Ein Hund.\nZwei Katzen \u2028 und ein Vogel.\n"
    plain = write(tmp_path / "a.de", text)
    packed = write(tmp_path / "a.de.gz", text, gz=True)
    # U+2028 is inside a sentence, not a line break
    assert (
        read_lines(plain)
        == read_lines(packed)
        == ["Ein Hund.", "Zwei Katzen \u2028 und ein Vogel."]
    )


def test_gzip_is_detected_by_content_not_suffix(tmp_path: Path) -> None:
    assert read_lines(write(tmp_path / "noext", "x\ny", gz=True)) == ["x", "y"]


def test_crlf_bom_and_missing_final_newline(tmp_path: Path) -> None:
    path = write(tmp_path / "win.txt", b"\xef\xbb\xbfone\r\ntwo\r\nthree")
    assert read_lines(path) == ["one", "two", "three"]


def test_read_parallel_keeps_pairs_aligned(tmp_path: Path) -> None:
    src = write(tmp_path / "s.en", "a\nb\nc\n")
    tgt = write(tmp_path / "t.de.gz", "A\nB\nC\n", gz=True)
    corpus = read_parallel(src, tgt)
    assert corpus.pairs() == [("a", "A"), ("b", "B"), ("c", "C")]
    assert (len(corpus), corpus.num_lines, corpus.num_empty_dropped) == (3, 3, 0)


def test_empty_lines_are_dropped_in_pairs_and_counted(tmp_path: Path, caplog) -> None:
    src = write(tmp_path / "s.en", "one\n\nthree\nfour\n   \nsix\n")
    tgt = write(tmp_path / "t.de", "eins\nzwei\n\nvier\nfünf\nsechs\n")
    with caplog.at_level(logging.WARNING):
        corpus = read_parallel(src, tgt)
    assert corpus.pairs() == [("one", "eins"), ("four", "vier"), ("six", "sechs")]
    assert (corpus.num_lines, corpus.num_empty_dropped) == (6, 3)
    assert "dropped 3 line pairs" in caplog.text and "first at line 2" in caplog.text


def test_different_line_counts_name_both_files_and_counts(tmp_path: Path) -> None:
    src = write(tmp_path / "s.en", "a\nb\nc\n")
    tgt = write(tmp_path / "t.de", "A\nB\n")
    with pytest.raises(InputError) as err:
        read_parallel(src, tgt)
    message = one_line(err)
    assert f"{src} has 3 lines" in message and f"{tgt} has 2" in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        read_parallel(tmp_path / "nope.en", tmp_path / "nope.de")
    assert one_line(err) == f"{tmp_path / 'nope.en'}: file not found"


@pytest.mark.parametrize("gz", [False, True])
def test_empty_file(tmp_path: Path, gz: bool) -> None:
    path = write(tmp_path / "empty.txt", "", gz=gz)
    with pytest.raises(InputError) as err:
        read_lines(path)
    assert one_line(err) == f"{path}: file is empty"


def test_all_pairs_empty(tmp_path: Path) -> None:
    src = write(tmp_path / "s", "\n\n")
    tgt = write(tmp_path / "t", "x\n\n")
    with pytest.raises(InputError, match="no line pair has text on both sides"):
        read_parallel(src, tgt)


@pytest.mark.parametrize("gz", [False, True])
def test_not_utf8_names_line_and_byte_offset(tmp_path: Path, gz: bool) -> None:
    # line 1 is 6 bytes ("Café\n" with é as 2 bytes), so the bad byte on line 2 is at offset 6 + 3
    data = "Café\n".encode() + b"abc\xff def\nok\n"
    path = write(tmp_path / "latin.txt", data, gz=gz)
    with pytest.raises(InputError) as err:
        read_lines(path)
    assert one_line(err) == (
        f"{path}, line 2: not valid UTF-8 (byte 0xff at byte offset 9 of the file)"
    )


def test_folder_and_corrupt_gzip(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a folder"):
        read_lines(tmp_path)
    broken = write(tmp_path / "broken.gz", gzip.compress(b"one\ntwo\n" * 1000)[:-20])
    with pytest.raises(InputError) as err:
        read_lines(broken)
    assert "not a readable gzip file" in one_line(err)


def test_iter_file_lines_keeps_text_untouched(tmp_path: Path) -> None:
    path = write(tmp_path / "t.tsv", " a\tb \n\n")
    assert list(iter_file_lines(path)) == [(1, " a\tb "), (2, "")]


def test_corpus_checks_alignment() -> None:
    with pytest.raises(ValueError, match="aligned"):
        ParallelCorpus(["a"], [])
