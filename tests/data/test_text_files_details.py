"""iter_file_lines in detail (tests/data/test_text_files.py has the whole files): line endings,
the byte offset of a bad byte on a later line (with a BOM), a file that cannot be opened, and a
read error named as such for a plain file and as a bad gzip file for a gzip one."""

from __future__ import annotations

import gzip
import io

import pytest

import transformer.data.text_files as text_files
from transformer.data.text_files import iter_file_lines
from transformer.errors import InputError


def test_crlf_and_lf_endings_are_removed_and_nothing_else(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"one\r\ntwo\nthree\r\n \r\nlast\r")
    assert list(iter_file_lines(path)) == [(1, "one"), (2, "two"), (3, "three"), (4, " "), (5, "last")]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_the_offset_of_a_bad_byte_counts_from_the_start_of_the_file(tmp_path, bom):
    path = tmp_path / "bad.txt"
    path.write_bytes(bom + b"first\nsecond\nab\xffc\n")
    with pytest.raises(InputError) as bad:
        list(iter_file_lines(path))
    offset = len(bom) + len(b"first\nsecond\nab")
    assert str(bad.value) == f"{path}, line 3: not valid UTF-8 (byte 0xff at byte offset {offset} of the file)"


def test_a_file_that_cannot_be_opened(tmp_path, monkeypatch):
    path = tmp_path / "a.txt"
    path.write_text("x\n")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(text_files, "open", refuse, raising=False)
    with pytest.raises(InputError) as bad:
        list(iter_file_lines(path))
    assert str(bad.value) == f"{path}: cannot open (Permission denied)"


class Failing(io.BufferedReader):
    """A plain file whose second read fails as a disk would."""

    def __iter__(self):
        yield self.readline()
        raise OSError(5, "Input/output error")


def test_a_read_error_of_a_plain_file_is_not_called_gzip(tmp_path, monkeypatch):
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo\n")
    real = open
    monkeypatch.setattr(text_files, "open", lambda p, mode: Failing(real(p, mode, buffering=0)),
                        raising=False)
    with pytest.raises(InputError) as bad:
        list(iter_file_lines(path))
    assert str(bad.value) == f"{path}: read error after line 1 ([Errno 5] Input/output error)"


def test_a_truncated_gzip_file_is_named_as_one(tmp_path):
    path = tmp_path / "a.txt.gz"
    whole = gzip.compress(b"".join(b"line %d\n" % i for i in range(2000)))
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InputError) as bad:
        list(iter_file_lines(path))
    assert str(bad.value).startswith(f"{path}: not a readable gzip file after line ")


def test_a_bad_byte_on_the_first_line_after_a_bom(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"\xef\xbb\xbfab\xffc\n")
    with pytest.raises(InputError) as bad:
        list(iter_file_lines(path))
    assert str(bad.value) == f"{path}, line 1: not valid UTF-8 (byte 0xff at byte offset 5 of the file)"
