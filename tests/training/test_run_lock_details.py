"""The run directory's lock in detail (tests/training/test_run_lock.py has the processes): what
its file holds, the lines it writes and logs, and releasing it."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import subprocess
import sys

import pytest

from transformer.errors import InputError
from transformer.training.run_lock import LOCK_FILE, RunLock, _alive, read_holder


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_alive():
    assert _alive(os.getpid()) is True
    assert _alive(dead_pid()) is False


@pytest.mark.parametrize(("text", "holder"), [
    ("123 a host with spaces\n", (123, "a host with spaces")),
    ("123\n", (123, "")),
    ("not a pid\n", (None, "")),
    ("", (None, "")),
])
def test_read_holder(tmp_path, text, holder):
    path = tmp_path / LOCK_FILE
    path.write_text(text)
    assert read_holder(path) == holder
    assert read_holder(tmp_path / "missing") == (None, "")


def test_the_lock_records_this_process_in_a_file_readable_by_all(tmp_path):
    old = os.umask(0o022)
    try:
        with RunLock(tmp_path / "deep" / "er" / "run") as lock:  # parents made
            assert lock.path.read_text() == f"{os.getpid()} {socket.gethostname()}\n"
            assert lock.path.stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)


def test_release_before_acquire_and_twice_is_harmless(tmp_path):
    lock = RunLock(tmp_path)
    lock.release()  # nothing to release yet
    lock.acquire()
    with pytest.raises(InputError):
        RunLock(tmp_path).acquire()
    lock.release()
    other = RunLock(tmp_path)
    other.acquire()  # free again (its descriptor most likely takes the number ``lock`` had)
    lock.release()  # a second release leaves alone the lock another holder took since
    with pytest.raises(InputError):
        RunLock(tmp_path).acquire()
    other.release()
    with RunLock(tmp_path):
        pass


def test_a_lock_that_cannot_be_created_is_one_line(tmp_path):
    (tmp_path / LOCK_FILE).mkdir()  # the lock's name taken by a folder
    with pytest.raises(InputError) as refused:
        RunLock(tmp_path).acquire()
    assert str(refused.value) == f"{tmp_path / LOCK_FILE}: cannot create the run directory's lock (Is a directory)"


def test_the_refusal_names_the_holder(tmp_path):
    with RunLock(tmp_path) as lock, pytest.raises(InputError) as refused:
        RunLock(tmp_path).acquire()  # a second open file: flock refuses it too
    assert str(refused.value) == (
        f"{tmp_path} is in use by process {os.getpid()} on {socket.gethostname()} (lock {lock.path}); "
        "wait for it to end or stop it, or choose another run directory")


def test_a_holder_that_wrote_nothing_is_another_process(tmp_path):
    fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(InputError) as refused:
            RunLock(tmp_path).acquire()
    finally:
        os.close(fd)
    assert str(refused.value).startswith(f"{tmp_path} is in use by another process (lock ")


@pytest.mark.parametrize(("host", "said"), [("elsewhere", "elsewhere"), ("", "an unknown host")])
def test_taking_over_an_ended_holder_is_logged(tmp_path, caplog, host, said):
    pid = dead_pid()
    (tmp_path / LOCK_FILE).write_text(f"{pid} {host}\n" if host else f"{pid}\n")
    with caplog.at_level(logging.INFO, logger="transformer.training.run_lock"), RunLock(tmp_path):
        pass
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path / LOCK_FILE}: taking over the lock of process {pid} on {said}, which has ended"]


@pytest.mark.parametrize("text", ["", "OWN"])
def test_a_fresh_or_own_lock_is_taken_silently(tmp_path, caplog, text):
    (tmp_path / LOCK_FILE).write_text(f"{os.getpid()} x\n" if text == "OWN" else text)
    with caplog.at_level(logging.INFO, logger="transformer.training.run_lock"), RunLock(tmp_path):
        pass
    assert caplog.records == []
