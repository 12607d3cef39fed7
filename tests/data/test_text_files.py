"""Reading JSON files with one-line errors that name the file."""

from __future__ import annotations

import pytest

from transformer.data.text_files import read_json
from transformer.errors import InputError


def test_read_json_returns_the_value_or_names_the_file(tmp_path):
    path = tmp_path / "index.json"
    path.write_text('{"a": [1, 2]}', encoding="utf-8")
    assert read_json(path, what="index", missing="no index") == {"a": [1, 2]}
    with pytest.raises(InputError, match=r"missing\.json: no index$"):
        read_json(tmp_path / "missing.json", what="index", missing="no index")
    path.write_text("{broken", encoding="utf-8")
    with pytest.raises(InputError, match=r"index\.json: unreadable index \(") as err:
        read_json(path, what="index", missing="no index")
    assert "\n" not in str(err.value)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="unreadable index"):
        read_json(path, what="index", missing="no index")


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
def test_lines_are_read_from_a_pipe_that_cannot_seek(tmp_path, gzipped):
    """`--train-src <(zcat big.gz)` hands a FIFO: the gzip check must not seek back."""
    import gzip
    import os
    import threading

    from transformer.data.text_files import iter_file_lines

    lines = ["ein Hund", "zwölf Katzen", ""]
    payload = "\n".join(lines).encode() + b"\n"
    payload = gzip.compress(payload) if gzipped else payload
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as out:
            out.write(payload)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        got = [text for _, text in iter_file_lines(fifo)]
    finally:
        writer.join(timeout=10)
    assert got == lines
