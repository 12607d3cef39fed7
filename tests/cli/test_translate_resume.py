"""``translate -i IN -o OUT`` streams into ``OUT.partial`` with a progress record, and ``--resume``
continues a run killed anywhere (SIGKILL) to the bytes one uninterrupted run writes; a resume with
other options, another model or another input, or with nothing to resume, is refused in one line."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from transformer.cli import main
from transformer.inference import lines as lines_module

FAST = ["--threads", "1", "--precision", "fp32", "--no-progress", "--batch-size", "1"]


def translate(run_dir, src, out, *extra) -> int:
    return main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(out), *FAST,
                 *extra])


def partial_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def killed_at(args: list[str], partial: Path, lines: int) -> None:
    """Run ``translate args`` in a child process and SIGKILL it once ``partial`` holds ``lines``
    lines (polling, so somewhere inside the window after them)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    child = subprocess.Popen([sys.executable, "-m", "transformer", "translate", *args],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while partial_lines(partial) < lines and child.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL, "the child finished before it could be killed"


def test_killed_three_times_and_resumed_gives_the_same_bytes(cli, run_dir, tmp_path):
    src = cli.write(tmp_path / "in.txt", cli.numbers(600, empty_every=11))
    flags = ["--sampling", "--seed", "3", "--json"]
    whole = tmp_path / "whole.txt"
    assert translate(run_dir, src, whole, *flags) == 0
    out = tmp_path / "out.txt"
    partial = out.with_name("out.txt.partial")
    args = ["--model", str(run_dir), "-i", str(src), "-o", str(out), *FAST, *flags]
    points = sorted(random.Random(int(time.time())).sample(range(1, 300), 3))
    for n, point in enumerate(points):
        killed_at([*args, *(["--resume"] if n else [])], partial, point)
        assert not out.exists()
        record = json.loads(out.with_name("out.txt.progress.json").read_text())
        assert record["bytes"] <= partial.stat().st_size
    assert main(["translate", *args, "--resume"]) == 0, points
    assert out.read_bytes() == whole.read_bytes(), points
    assert not partial.exists() and not out.with_name("out.txt.progress.json").exists()


class Killed(BaseException):
    """Stands for a kill between two windows."""


def interrupted(monkeypatch, after: int) -> None:
    """Make the next run stop (as killed) when it starts its window ``after`` + 1."""
    real = lines_module.translate_lines
    calls = []

    def translate_lines(*args, **kwargs):
        calls.append(1)
        if len(calls) > after:
            raise Killed
        return real(*args, **kwargs)

    monkeypatch.setattr(lines_module, "translate_lines", translate_lines)


@pytest.mark.parametrize("flags", [["--beam", "2", "--nbest", "2"], ["--alignments"],
                                   ["--json", "--alignments", "--beam", "1"], ["--prefixes"]],
                         ids=["nbest", "alignments", "json", "prefix-file"])
def test_resume_after_an_interruption_matches_one_run(cli, run_dir, tmp_path, monkeypatch, flags):
    lines = cli.numbers(120, empty_every=9)
    src = cli.write(tmp_path / "in.txt", lines)
    if flags == ["--prefixes"]:
        prefixes = ["zwei" if i % 3 == 0 else "" for i in range(len(lines))]
        flags = ["--target-prefix-file", str(cli.write(tmp_path / "prefixes.txt", prefixes))]
    whole, out = tmp_path / "whole.txt", tmp_path / "out.txt"
    assert translate(run_dir, src, whole, *flags) == 0
    with monkeypatch.context() as patch:
        interrupted(patch, after=2)
        with pytest.raises(Killed):
            translate(run_dir, src, out, *flags)
    partial = out.with_name("out.txt.partial")
    assert partial_lines(partial) > 0 and not out.exists()
    with partial.open("ab") as f:  # a kill may leave bytes the record does not count yet (here
        f.write(b"half a window\n" * 20_000)  # more than the rest of the output)
    assert translate(run_dir, src, out, *flags, "--resume") == 0
    assert out.read_bytes() == whole.read_bytes()
    if "--json" in flags:
        assert [json.loads(line)["line"] for line in cli.read(out)] == list(range(1, 121))


def test_a_file_goes_to_stdout_in_windows_as_to_a_file(cli, run_dir, tmp_path, capsys):
    src = cli.write(tmp_path / "in.txt", cli.numbers(70))
    out = tmp_path / "out.txt"
    assert translate(run_dir, src, out) == 0
    capsys.readouterr()
    assert main(["translate", "--model", str(run_dir), "-i", str(src), *FAST]) == 0
    assert capsys.readouterr().out == out.read_text(encoding="utf-8")


def test_what_cannot_be_resumed_is_refused_in_one_line(cli, run_dir, tokenizer, tmp_path,
                                                       monkeypatch, capsys):
    lines = cli.numbers(100)
    src = cli.write(tmp_path / "in.txt", lines)
    out = tmp_path / "out.txt"
    assert translate(run_dir, src, out, "--resume") == 2  # nothing to resume
    assert "out.txt.partial not found" in cli.one_line_error(capsys)
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "--resume"]) == 2
    assert "-o" in cli.one_line_error(capsys)
    with monkeypatch.context() as patch:
        interrupted(patch, after=2)
        with pytest.raises(Killed):
            translate(run_dir, src, out)
    capsys.readouterr()
    assert translate(run_dir, src, out) == 2  # a partial file and no --resume
    assert "pass --resume" in cli.one_line_error(capsys)
    assert translate(run_dir, src, out, "--resume", "--beam", "3") == 2
    assert "(options differ)" in cli.one_line_error(capsys)
    other = cli.make_run(tmp_path / "other", tokenizer, seed=1)
    assert main(["translate", "--model", str(other), "-i", str(src), "-o", str(out), *FAST,
                 "--resume"]) == 2
    assert "(model differ)" in cli.one_line_error(capsys)
    changed = cli.write(tmp_path / "changed.txt", ["seven", *lines[1:]])
    assert translate(run_dir, changed, out, "--resume") == 2
    assert "first 64 lines of" in cli.one_line_error(capsys)
    grown = cli.write(tmp_path / "grown.txt", [*lines, "nine"])  # the done lines are unchanged
    assert translate(run_dir, grown, out, "--resume") == 0
    assert len(cli.read(out)) == 101


def test_killed_after_the_rename_resume_finishes(cli, run_dir, tmp_path, capsys):
    src = cli.write(tmp_path / "in.txt", cli.numbers(5))
    out = tmp_path / "out.txt"
    assert translate(run_dir, src, out) == 0
    text = out.read_bytes()
    record = out.with_name("out.txt.progress.json")
    record.write_text(json.dumps({"format": 1, "lines": 5}))  # as left between rename and unlink
    assert translate(run_dir, src, out, "--resume") == 0
    assert out.read_bytes() == text and not record.exists()


def test_a_bad_line_keeps_the_work_before_it_and_a_fixed_file_resumes(cli, run_dir, tmp_path,
                                                                       capsys):
    lines = cli.numbers(120)
    out = tmp_path / "out.txt"
    partial, record = out.with_name("out.txt.partial"), out.with_name("out.txt.progress.json")
    early = tmp_path / "early.txt"
    early.write_bytes(b"one\ntwo \xff three\n")
    assert translate(run_dir, early, out) == 2  # nothing done: nothing left to refuse a rerun
    assert "line 2" in cli.one_line_error(capsys)
    assert not out.exists() and not partial.exists() and not record.exists()
    src = tmp_path / "in.txt"
    src.write_bytes(b"".join(f"{line}\n".encode() for line in lines[:99]) + b"bad \xff\n" +
                    b"".join(f"{line}\n".encode() for line in lines[100:]))
    assert translate(run_dir, src, out) == 2
    assert "line 100" in cli.one_line_error(capsys)
    assert json.loads(record.read_text())["lines"] == 96 and not out.exists()
    cli.write(src, lines)  # fixed after the lines done
    assert translate(run_dir, src, out, "--resume") == 0
    once = tmp_path / "once.txt"
    assert translate(run_dir, src, once) == 0
    assert out.read_bytes() == once.read_bytes()
