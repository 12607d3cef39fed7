"""The one atomic writer: the file appears whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from transformer.atomic import atomic_write, atomic_write_bytes
from transformer.errors import InputError, WriteError


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


def test_a_kill_inside_atomic_write_bytes_leaves_the_old_file(tmp_path, monkeypatch):
    """What tokenizers, labels and ``translate -o`` go through: killed half-way through the data
    (a BaseException, as a signal's exit would be), the old file is whole."""
    path = tmp_path / "labels.json"
    atomic_write_bytes(path, b"old and whole")

    class Killed(BaseException):
        pass

    real = Path.write_bytes

    def half(self, data):
        real(self, data[: len(data) // 2])
        raise Killed

    monkeypatch.setattr(Path, "write_bytes", half)
    with pytest.raises(Killed):
        atomic_write_bytes(path, b"new data that never lands")
    monkeypatch.undo()
    assert path.read_bytes() == b"old and whole"
    assert [p.name for p in tmp_path.iterdir()] == ["labels.json"]


def test_the_data_is_fsynced_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = tmp_path / "data.bin"
    atomic_write_bytes(path, b"bytes")
    kinds = [kind for kind, _ in events]
    assert kinds == ["fsync", "replace", "fsync"]
    assert ".data.bin.tmp-" in events[0][1] and events[1][1] == str(path)
    assert events[2][1] == str(tmp_path)


def test_a_failed_fsync_of_the_data_fails_the_write(tmp_path, monkeypatch):
    path = tmp_path / "data.bin"
    atomic_write_bytes(path, b"good")

    def broken(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(WriteError, match="Input/output error"):
        atomic_write_bytes(path, b"lost on the way to the disk")
    monkeypatch.undo()
    assert path.read_bytes() == b"good"


def test_a_directory_in_the_files_place_is_refused_as_input(tmp_path):
    """An output path that names a directory is the caller's mistake (exit 2), not a failed write;
    the directory is untouched and no temporary is left beside it."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "kept").write_text("x")
    with pytest.raises(InputError, match="is a directory"):
        atomic_write_bytes(tmp_path / "out", b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (tmp_path / "out" / "kept").read_text() == "x"


def test_translate_to_a_directory_is_one_line_and_exit_2(tmp_path, capsys):
    from transformer.cli import main
    from transformer.inference.file_job import check_start

    (tmp_path / "out").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        check_start(tmp_path / "out", resume=False)
    source = tmp_path / "in.txt"
    source.write_text("one\n")
    assert main(["translate", "--model", str(tmp_path / "none"), "-i", str(source),
                 "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a directory" in err[0], err
