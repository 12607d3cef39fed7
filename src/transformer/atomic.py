"""Atomic writes, the one way the package puts a file or a directory on disk.

A file is written to a temporary name in its own directory, fsync'ed and moved into place with
``os.replace``; a directory is filled under ``NAME.tmp`` and then swapped in by two renames
(``NAME`` -> ``NAME.old``, ``NAME.tmp`` -> ``NAME``). A kill between those two renames leaves
``NAME.old``, which readers fall back to (:func:`existing_dir`), so some complete version is always
readable and nothing is ever half-written.

A write that fails (a full disk, a read-only folder, an I/O error reported by ``fsync``) raises
:class:`~transformer.errors.WriteError`: one line naming the path and the reason, with the
previous version of the file or directory untouched.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from transformer.errors import InputError, WriteError


def _fsync_path(path: Path) -> None:
    """Flush a file or a directory entry to disk.

    A file's fsync must succeed (its error is the disk's only report of lost data); a
    directory's is best effort, since not every OS or file system can open or sync one.
    """
    is_dir = path.is_dir()
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if is_dir else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if is_dir:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not is_dir:
            raise
    finally:
        os.close(fd)


def _write_error(path: Path, err: BaseException) -> BaseException:
    """``err`` as the one-line WriteError naming ``path`` (a bug or a kill passes through)."""
    if isinstance(err, WriteError | InputError) or not isinstance(err, Exception):
        return err
    if isinstance(err, OSError) and err.strerror:
        where = f" at {err.filename}" if err.filename and str(err.filename) != str(path) else ""
        reason = f"{err.strerror}{where}"
    else:  # torch's and safetensors' writers report a failed write as their own errors
        reason = (str(err).splitlines() or [type(err).__name__])[0]
    return WriteError(f"{path}: could not write ({reason}); the previous version is kept")


def atomic_write(path: Path | str, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, fsync it, then rename it to ``path``.

    If ``write`` fails the temporary file is removed and ``path`` is left as it was; a ``path``
    that is a directory is refused (InputError) before anything is written.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory; give the output file's name")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        _fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        raise _write_error(path, err) from err
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
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        fill(tmp)
        for child in tmp.rglob("*"):
            _fsync_path(child)
        _fsync_path(tmp)
        if path.exists():
            # ``old`` is a stale copy from an earlier swap when ``path`` is complete
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
        os.replace(tmp, path)  # a kill or failure before this line leaves ``old`` for readers
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_error(path, err) from err
    _fsync_path(path.parent)
    shutil.rmtree(old, ignore_errors=True)


def existing_dir(path: Path | str) -> Path | None:
    """``path`` if it is a directory, else the ``path.old`` an interrupted swap left, else None."""
    path = Path(path)
    if path.is_dir():
        return path
    old = path.with_name(path.name + ".old")
    return old if old.is_dir() else None
