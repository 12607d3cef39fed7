"""Atomic writes, the one way the package puts a file or a directory on disk.

A file is written to a temporary name in its own directory, fsync'ed and moved into place with
``os.replace``; a directory is filled under ``NAME.tmp`` and then swapped in by two renames
(``NAME`` -> ``NAME.old``, ``NAME.tmp`` -> ``NAME``). A kill between those two renames leaves
``NAME.old``, which readers fall back to (:func:`existing_dir`), so some complete version is always
readable and nothing is ever half-written.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path


def _fsync_path(path: Path) -> None:
    """Flush a file or a directory entry to disk (directories: best effort, not on every OS)."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if path.is_dir() else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path | str, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, fsync it, then rename it to ``path``.

    If ``write`` fails the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        _fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_path(path.parent)


def atomic_write_text(path: Path | str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, creating its folder when missing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def replace_dir(path: Path | str, fill: Callable[[Path], None]) -> None:
    """Fill a fresh ``path.tmp`` directory with ``fill(tmp)``, then swap it in for ``path``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    old = path.with_name(path.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        for child in tmp.rglob("*"):
            _fsync_path(child)
        _fsync_path(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if path.exists():
        shutil.rmtree(old, ignore_errors=True)  # a stale copy from an earlier, completed swap
        os.replace(path, old)
    os.replace(tmp, path)  # a kill before this line leaves ``old`` for readers
    _fsync_path(path.parent)
    shutil.rmtree(old, ignore_errors=True)


def existing_dir(path: Path | str) -> Path | None:
    """``path`` if it is a directory, else the ``path.old`` an interrupted swap left, else None."""
    path = Path(path)
    if path.is_dir():
        return path
    old = path.with_name(path.name + ".old")
    return old if old.is_dir() else None
