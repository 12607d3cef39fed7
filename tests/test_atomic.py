"""The one atomic writer: the file appears whole or not at all."""

from __future__ import annotations

import pytest

from transformer.atomic import atomic_write, atomic_write_bytes
from transformer.errors import WriteError


def test_atomic_write_bytes_makes_the_folder_and_replaces_the_file(tmp_path):
    path = tmp_path / "new" / "folder" / "data.bin"
    atomic_write_bytes(path, b"first")
    assert path.read_bytes() == b"first"
    atomic_write_bytes(path, b"second")
    assert path.read_bytes() == b"second"
    assert sorted(p.name for p in path.parent.iterdir()) == ["data.bin"]  # no temporary left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "data.bin"
    atomic_write_bytes(path, b"good")

    def half_then_fail(tmp):
        tmp.write_bytes(b"half")
        raise RuntimeError("killed")

    with pytest.raises(WriteError, match="killed") as caught:
        atomic_write(path, half_then_fail)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    assert path.read_bytes() == b"good"
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]
