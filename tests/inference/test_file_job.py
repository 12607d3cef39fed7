"""``write_resumably``: windows start at the same input lines in a resumed run as in one run,
the partial file is cut back to the recorded bytes, and what cannot be resumed is refused."""

from __future__ import annotations

import json

import pytest

from transformer.errors import InputError
from transformer.inference.file_job import (
    partial_path,
    progress_path,
    windows,
    write_resumably,
)


class Stop(BaseException):
    """Stands for a kill."""


def render_of(seen: list[int], *, stop_at: int | None = None):
    """A render that writes each line with its window's first line number (so a window moved by
    a resume shows in the bytes), recording those numbers, and stops at window ``stop_at``."""

    def render(records, first):
        if stop_at is not None and len(seen) == stop_at:
            raise Stop
        seen.append(first)
        return "".join(f"{first}:{r[0]}\n" for r in records)

    return render


def job(out, lines, render, *, resume=False, window=3, fingerprint=None):
    return write_resumably(out, ((line,) for line in lines), window=window, render=render,
                           fingerprint=fingerprint or {"k": 1}, resume=resume, source="in")


def test_windows_are_lazy_and_bounded():
    assert list(windows(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(ValueError, match="window"):
        list(windows([], 0))


def test_resume_continues_at_the_same_window_starts(tmp_path):
    lines = [f"line {i}" for i in range(10)]
    once, out = tmp_path / "once.txt", tmp_path / "out.txt"
    assert job(once, lines, render_of([])) == 10
    seen: list[int] = []
    with pytest.raises(Stop):
        job(out, lines, render_of(seen, stop_at=2))
    record = json.loads(progress_path(out).read_text())
    assert (record["lines"], seen) == (6, [1, 4])
    with partial_path(out).open("ab") as f:
        f.write(b"7:a window the record does not count\n" * 50)
    resumed: list[int] = []
    assert job(out, lines, render_of(resumed), resume=True) == 10
    assert resumed == [7, 10]
    assert out.read_bytes() == once.read_bytes()
    assert not partial_path(out).exists() and not progress_path(out).exists()


def test_refusals_name_what_differs(tmp_path):
    lines = [f"line {i}" for i in range(10)]
    out = tmp_path / "out.txt"
    with pytest.raises(InputError, match="no interrupted run"):
        job(out, lines, render_of([]), resume=True)
    with pytest.raises(Stop):
        job(out, lines, render_of([], stop_at=1))
    with pytest.raises(InputError, match="pass --resume"):
        job(out, lines, render_of([]))
    with pytest.raises(InputError, match=r"\(k differ\)"):
        job(out, lines, render_of([]), resume=True, fingerprint={"k": 2})
    with pytest.raises(InputError, match="first 3 lines of in"):
        job(out, ["other", *lines[1:]], render_of([]), resume=True)
    partial_path(out).write_bytes(b"")
    with pytest.raises(InputError, match="shorter than"):
        job(out, lines, render_of([]), resume=True)
