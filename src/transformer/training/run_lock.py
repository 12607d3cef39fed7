"""One writer per run directory: a lock held for the life of a training run.

``RUN_DIR/.lock`` is locked with ``flock`` (exclusive, non-blocking) by the process that trains
into ``RUN_DIR`` and holds that process's pid and host. A second ``train`` (or ``--resume``) on
the same directory is refused with one line naming the holder. The kernel drops a ``flock`` when
its process dies, however it dies, so the lock of a killed run is free at once and the next run
takes it over (and writes its own pid and host).

A command that fails before writing anything (a typo in ``--resume``, a missing data file) leaves
no trace: a lock whose acquisition created the run directory removes the lock file and the folders
it created when the directory holds nothing else at release. Deleting a lock file could let a
process that opened it just before lock an orphan while a third locks its replacement, so a holder
checks after ``flock`` that the file it locked is still the one at the path, and locks again if
not.

Where ``flock`` is not supported (some network file systems), the pid in the file decides: the
lock is free when that process no longer runs on this host.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from transformer.errors import InputError

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is open on the file now at ``path``."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def read_holder(path: Path) -> tuple[int | None, str]:
    """``(pid, host)`` written in a lock file; ``(None, "")`` when unreadable."""
    try:
        pid, _, host = path.read_text(encoding="utf-8").strip().partition(" ")
        return int(pid), host
    except (OSError, ValueError, UnicodeDecodeError):
        return None, ""


class RunLock:
    """``with RunLock(run_dir):`` holds the run directory's lock (creating the folder).

    Raises :class:`InputError` naming the holding process when another process holds it.
    """

    def __init__(self, run_dir: Path | str) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None
        self._created: list[Path] = []  # folders this acquisition made, deepest first

    def acquire(self) -> None:
        folder = self.path.parent
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{folder}: exists and is not a directory")
        created = []
        for path in (folder, *folder.parents):
            if path.exists():
                break
            created.append(path)
        fd = self._lock()
        self._created = created
        pid, host = read_holder(self.path)
        if pid is not None and pid != os.getpid():
            log.info("%s: taking over the lock of process %d on %s, which has ended", self.path,
                     pid, host or "an unknown host")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        os.fsync(fd)
        self._fd = fd

    def _lock(self) -> int:
        """A descriptor of the file at ``self.path``, locked (or, without ``flock``, free by its
        recorded pid)."""
        while True:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise InputError(f"{self.path}: cannot create the run directory's lock "
                                 f"({err.strerror or err})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise InputError(self._refusal()) from None
                # no flock on this file system: decide by the recorded pid
                pid, host = read_holder(self.path)
                if (pid is not None and pid != os.getpid() and host == socket.gethostname()
                        and _alive(pid)):
                    os.close(fd)
                    raise InputError(self._refusal()) from None
                return fd
            if _same_file(fd, self.path):
                return fd
            os.close(fd)  # an ending holder removed the file between our open and flock

    def _refusal(self) -> str:
        pid, host = read_holder(self.path)
        holder = f"process {pid} on {host}" if pid is not None else "another process"
        return (f"{self.path.parent} is in use by {holder} (lock {self.path}); wait for it to "
                "end or stop it, or choose another run directory")

    def release(self) -> None:
        if self._fd is None:
            return
        folder = self.path.parent
        with contextlib.suppress(OSError):
            if self._created and [p.name for p in folder.iterdir()] == [LOCK_FILE]:
                self.path.unlink()
                for path in self._created:
                    path.rmdir()
        os.close(self._fd)  # closing the only descriptor releases the flock
        self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


@contextlib.contextmanager
def hold_run_dir(run_dir: Path | str) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the ``with`` block on rank 0 of a ``torchrun`` job (or in a
    single process); the other ranks write nothing and take no lock."""
    if int(os.environ.get("RANK", "0")) != 0:
        yield
        return
    with RunLock(run_dir):
        yield
