"""A failed write at any point of a checkpoint (a full disk, an I/O error reported by fsync, a
failed rename) leaves the previous checkpoint whole and loadable, and says so in one line naming
the checkpoint; injected at each write of a checkpoint in turn."""

from __future__ import annotations

import errno
import os

import pytest
import torch

import transformer.training.checkpoint as checkpoint_module
from transformer.errors import WriteError
from transformer.training.checkpoint import CHECKPOINT_DIR, load_checkpoint, save_checkpoint

# the operations a checkpoint write goes through: (module, attribute)
WRITES = [(os, "replace"), (os, "fsync"), (os, "mkdir"), (torch, "save"),
          (checkpoint_module, "save_model")]


class Injector:
    """Counts the calls of every write operation; ``fail_at`` makes call number k fail (after
    writing half of what it would when ``half`` is set)."""

    def __init__(self, monkeypatch, *, fail_at=None, half=False):
        self.calls: list[str] = []
        self.fail_at, self.half, self.failed = fail_at, half, None
        for module, name in WRITES:
            monkeypatch.setattr(module, name, self._wrap(getattr(module, name), name))

    def _wrap(self, original, name):
        def call(*args, **kwargs):
            self.calls.append(name)
            if len(self.calls) - 1 != self.fail_at:
                return original(*args, **kwargs)
            self.failed = name
            if self.half and name in ("save", "save_model"):
                original(*args, **kwargs)
                target = args[1] if name == "save" else args[1]
                size = os.path.getsize(target)
                with open(target, "r+b") as f:
                    f.truncate(size // 2)
            raise OSError(errno.ENOSPC, "No space left on device", "injected")
        return call


def state(step: int) -> dict:
    return {"trainer": {"step": step}, "optimizer": {"lr": torch.full((3,), float(step))}}


def model_with(value: float) -> torch.nn.Module:
    model = torch.nn.Linear(4, 3)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


def check_loads(run, value: float, step: int) -> None:
    loaded = model_with(-1.0)
    saved = load_checkpoint(run, model=loaded)
    assert saved["trainer"]["step"] == step
    assert all(torch.equal(p, torch.full_like(p, value)) for p in loaded.parameters())


@pytest.mark.parametrize("half", [False, True])
def test_a_failure_at_each_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch, half):
    run = tmp_path / "run"
    save_checkpoint(run, model=model_with(1.0), state=state(1))
    with monkeypatch.context() as m:  # count the writes of one checkpoint over an existing one
        probe = Injector(m)
        save_checkpoint(run, model=model_with(1.0), state=state(1))
    writes = len(probe.calls)
    assert {"replace", "fsync", "save", "save_model"} <= set(probe.calls)
    raised = set()
    for k in range(writes):
        save_checkpoint(run, model=model_with(1.0), state=state(1))  # the good one, each time
        with monkeypatch.context() as m:
            injector = Injector(m, fail_at=k, half=half)
            try:
                save_checkpoint(run, model=model_with(2.0), state=state(2))
            except WriteError as err:
                message = str(err)
                assert "\n" not in message and str(run / CHECKPOINT_DIR) in message
                assert "No space left on device" in message
                raised.add(injector.failed)
                check_loads(run, 1.0, 1)  # the previous checkpoint, whole
                assert not (run / "checkpoint.tmp").exists()
                continue
        # only a directory's fsync is best effort: the write went through
        assert injector.failed == "fsync"
        check_loads(run, 2.0, 2)
    assert raised == {"replace", "fsync", "mkdir", "save", "save_model"}


def test_a_kill_between_the_two_renames_leaves_the_old_checkpoint_readable(tmp_path, monkeypatch):
    run = tmp_path / "run"
    save_checkpoint(run, model=model_with(1.0), state=state(1))
    real = os.replace

    class Killed(BaseException):
        pass

    def rename(src, dst):
        if str(src).endswith("checkpoint.tmp"):
            raise Killed  # a SIGKILL here never runs the cleanup either
        return real(src, dst)

    monkeypatch.setattr(os, "replace", rename)
    with pytest.raises(Killed):
        save_checkpoint(run, model=model_with(2.0), state=state(2))
    monkeypatch.undo()
    assert not (run / CHECKPOINT_DIR).exists() and (run / "checkpoint.old").is_dir()
    check_loads(run, 1.0, 1)
    save_checkpoint(run, model=model_with(3.0), state=state(3))  # the next write recovers
    check_loads(run, 3.0, 3)
    assert not (run / "checkpoint.old").exists()
