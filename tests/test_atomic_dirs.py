"""transformer.atomic beyond the single file (tests/test_atomic.py): the directory swap, what is
fsync'ed and how, and the one line a failed write gets."""

from __future__ import annotations

import errno
import os

import pytest

import transformer.atomic as atomic
from transformer.atomic import atomic_write, atomic_write_text, existing_dir, replace_dir
from transformer.errors import WriteError


def fill_with(files: dict[str, bytes]):
    def fill(tmp):
        for name, data in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_bytes(data)
    return fill


def tree(path):
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_replace_dir_swaps_in_a_whole_directory_and_leaves_nothing_beside_it(tmp_path):
    run = tmp_path / "deep" / "er" / "run"  # its parents are made
    replace_dir(run, fill_with({"a.txt": b"1", "sub/b.txt": b"2"}))
    assert tree(run) == {"a.txt": b"1", "sub/b.txt": b"2"}
    replace_dir(run, fill_with({"c.txt": b"3"}))
    assert tree(run) == {"c.txt": b"3"}
    assert sorted(p.name for p in run.parent.iterdir()) == ["run"]


def test_stale_tmp_and_old_from_a_killed_swap_are_cleared(tmp_path):
    run = tmp_path / "run"
    replace_dir(run, fill_with({"a.txt": b"1"}))
    for name in ("run.tmp", "run.old"):  # as a kill during a fill, or between the renames, leaves
        (tmp_path / name).mkdir()
        (tmp_path / name / "junk").write_bytes(b"junk")
    replace_dir(run, fill_with({"b.txt": b"2"}))
    assert tree(run) == {"b.txt": b"2"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_failed_fill_keeps_the_old_directory_and_removes_the_new(tmp_path):
    run = tmp_path / "run"
    replace_dir(run, fill_with({"a.txt": b"1"}))

    def fail(tmp):
        (tmp / "half.txt").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(WriteError) as caught:
        replace_dir(run, fail)
    assert str(caught.value) == f"{run}: could not write (No space left on device); the previous version is kept"
    assert tree(run) == {"a.txt": b"1"} and sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_directory_that_cannot_be_made_is_a_write_error(tmp_path):
    (tmp_path / "file").write_bytes(b"not a folder")
    with pytest.raises(WriteError) as caught:
        replace_dir(tmp_path / "file" / "run", fill_with({"a": b"1"}))
    assert str(tmp_path / "file" / "run") in str(caught.value)


def test_a_reader_falls_back_to_old_only_when_the_directory_is_missing(tmp_path):
    run = tmp_path / "run"
    assert existing_dir(run) is None
    (tmp_path / "run.old").mkdir()
    assert existing_dir(run) == tmp_path / "run.old"
    run.mkdir()
    assert existing_dir(run) == run


def test_every_file_and_folder_of_the_swap_is_fsynced(tmp_path, monkeypatch):
    synced = []
    real = atomic._fsync_path
    monkeypatch.setattr(atomic, "_fsync_path", lambda p: synced.append(p) or real(p))
    run = tmp_path / "run"
    replace_dir(run, fill_with({"a.txt": b"1", "sub/b.txt": b"2"}))
    tmp = tmp_path / "run.tmp"
    assert set(synced[:3]) == {tmp / "a.txt", tmp / "sub", tmp / "sub" / "b.txt"}  # any order
    assert synced[3:] == [tmp, tmp_path]  # then the new folder, then the one it is renamed in


@pytest.mark.skipif(not hasattr(os, "O_DIRECTORY"), reason="no O_DIRECTORY on this OS")
def test_a_file_is_opened_read_only_and_a_folder_as_a_directory(tmp_path, monkeypatch):
    opened = []
    real = os.open
    monkeypatch.setattr(os, "open", lambda path, flags, *a: opened.append((str(path), flags)) or real(path, flags, *a))
    path = tmp_path / "f.txt"
    atomic_write_text(path, "x")
    (tmp_name, file_flags), (folder, folder_flags) = opened
    assert tmp_name.startswith(str(tmp_path / ".f.txt.tmp-")) and file_flags == os.O_RDONLY
    assert folder == str(tmp_path) and folder_flags == os.O_RDONLY | os.O_DIRECTORY


@pytest.mark.parametrize(("error", "line"), [
    (OSError(errno.ENOSPC, "No space left on device", "/elsewhere/f"), "No space left on device at /elsewhere/f"),
    (OSError(errno.ENOSPC, "No space left on device", "PATH"), "No space left on device"),
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    (RuntimeError("the writer's own error\nwith a second line"), "the writer's own error"),
    (RuntimeError(), "RuntimeError"),
])
def test_a_failed_write_is_one_line_naming_the_path_and_the_reason(tmp_path, error, line):
    path = tmp_path / "f.bin"
    if getattr(error, "filename", None) == "PATH":
        error = OSError(errno.ENOSPC, "No space left on device", str(path))

    def fail(tmp):  # before the temporary file exists
        raise error

    with pytest.raises(WriteError) as caught:
        atomic_write(path, fail)
    assert str(caught.value) == f"{path}: could not write ({line}); the previous version is kept"
    assert list(tmp_path.iterdir()) == []
