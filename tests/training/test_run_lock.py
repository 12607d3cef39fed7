"""One writer per run directory: the lock refuses a second holder by name and is taken over from a
dead process."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import subprocess
import sys

import pytest

from transformer.errors import InputError
from transformer.training.run_lock import LOCK_FILE, RunLock, read_holder


def test_a_second_holder_is_refused_with_one_line_naming_the_first(tmp_path):
    run = tmp_path / "run"
    with RunLock(run):
        assert read_holder(run / LOCK_FILE) == (os.getpid(), socket.gethostname())
        with pytest.raises(InputError) as refused, RunLock(run):
            pass
        message = str(refused.value)
        assert "\n" not in message and f"process {os.getpid()} on {socket.gethostname()}" in message
        assert str(run) in message
    with RunLock(run):  # released at the end of the block
        pass


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path):
    run = tmp_path / "run"
    code = ("import sys, os, signal; from transformer.training.run_lock import RunLock; "
            "RunLock(sys.argv[1]).acquire(); print(os.getpid(), flush=True); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    child = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == -9
    dead = int(child.stdout.split()[0])
    assert read_holder(run / LOCK_FILE)[0] == dead
    with RunLock(run):
        assert read_holder(run / LOCK_FILE)[0] == os.getpid()


def test_a_live_holder_in_another_process_is_refused(tmp_path):
    run = tmp_path / "run"
    code = ("import sys, time; from transformer.training.run_lock import RunLock; "
            "RunLock(sys.argv[1]).acquire(); print('locked', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(run)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(InputError, match=f"process {child.pid} "), RunLock(run):
            pass
    finally:
        child.kill()
        child.wait()
    with RunLock(run):
        pass


@pytest.mark.parametrize(("holder_alive", "refused"), [(True, True), (False, False)])
def test_without_flock_the_recorded_pid_decides(tmp_path, monkeypatch, holder_alive, refused):
    run = tmp_path / "run"
    run.mkdir()
    if holder_alive:
        pid = os.getppid()
    else:
        child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                               capture_output=True, text=True)
        pid = int(child.stdout)
    (run / LOCK_FILE).write_text(f"{pid} {socket.gethostname()}\n")

    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    lock = RunLock(run)
    if refused:
        with pytest.raises(InputError, match=f"process {pid} "):
            lock.acquire()
    else:
        lock.acquire()
        assert read_holder(run / LOCK_FILE)[0] == os.getpid()
        lock.release()


def test_a_file_in_the_way_is_bad_input(tmp_path):
    (tmp_path / "run").write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        RunLock(tmp_path / "run").acquire()


def test_a_command_that_wrote_nothing_leaves_no_folder_it_created(tmp_path):
    run = tmp_path / "runs" / "new"
    with pytest.raises(RuntimeError), RunLock(run):
        raise RuntimeError("bad input")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_existed_or_was_written_to_is_kept(tmp_path):
    existing = tmp_path / "existing"
    existing.mkdir()
    with RunLock(existing):
        pass
    assert existing.is_dir()
    written = tmp_path / "written"
    with RunLock(written):
        (written / "config.json").write_text("{}")
    assert sorted(p.name for p in written.iterdir()) == [LOCK_FILE, "config.json"]


def test_a_lock_file_removed_between_open_and_flock_is_locked_again(tmp_path, monkeypatch):
    run = tmp_path / "run"
    real_flock = fcntl.flock
    locked = []

    def racing(fd, op):
        if not locked:  # an ending holder removes the file just after this process opened it
            (run / LOCK_FILE).unlink()
        locked.append(fd)
        return real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", racing)
    lock = RunLock(run)
    lock.acquire()
    try:
        assert len(locked) == 2
        assert os.fstat(lock._fd).st_ino == os.stat(run / LOCK_FILE).st_ino
        assert read_holder(run / LOCK_FILE)[0] == os.getpid()
    finally:
        lock.release()


def test_a_created_folder_removed_by_someone_else_still_releases(tmp_path):
    run = tmp_path / "run"
    lock = RunLock(run)
    lock.acquire()
    (run / LOCK_FILE).unlink()
    run.rmdir()
    lock.release()  # nothing left to clean: no error, and the descriptor is closed
    assert lock._fd is None and not run.exists()
    with RunLock(run):
        pass
