"""A file translated (or classified) as it is read, in windows, and resumable after a kill.

``translate -i IN -o OUT`` and ``classify predict -i IN -o OUT`` go through :func:`write_resumably`:
the input is read a window of lines at a time (memory stays flat in the file's size), each window
is rendered (the translator sorts its lines by length and batches them) and appended to
``OUT.partial``, which is flushed and fsync'ed before ``OUT.progress.json`` records the lines and
bytes done (written atomically). A kill at any moment therefore leaves a record that is never
ahead of the partial file. Run again with ``resume=True``, the partial file is cut back to the
recorded bytes, the done input lines are read (and checked against the record's hash of them)
but not rendered again, and the job goes on; windows start at the same input lines as in an
uninterrupted run, so the output is byte for byte the same. At the end ``OUT.partial`` is renamed
to ``OUT`` (atomically) and the record is removed.

What is checked on resume: the options and the model (``fingerprint``, compared key by key; a
difference names the keys) and the input lines already done (a SHA-256 of them): a different input
is refused, while one whose done lines are unchanged (a file appended to, or fixed further on)
resumes correctly. Without ``resume``, an existing ``OUT.partial`` is refused: it holds an
interrupted run's work, which ``--resume`` continues and deleting it discards.

    write_resumably("out.txt", ((line,) for line in lines), window=2048, resume=False,
                    render=lambda records, first: "".join(r[0].upper() + "\\n" for r in records),
                    fingerprint={"verb": "upper"}, source="in.txt")
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from transformer.atomic import atomic_write_text
from transformer.errors import InputError, WriteError

log = logging.getLogger(__name__)

FORMAT = 1
PARTIAL_SUFFIX = ".partial"
PROGRESS_SUFFIX = ".progress.json"
T = TypeVar("T")


def partial_path(output: Path | str) -> Path:
    """Where the output is written until it is complete: ``OUT.partial``."""
    output = Path(output)
    return output.with_name(output.name + PARTIAL_SUFFIX)


def progress_path(output: Path | str) -> Path:
    """The progress record beside the output: ``OUT.progress.json``."""
    output = Path(output)
    return output.with_name(output.name + PROGRESS_SUFFIX)


def windows(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last may be shorter), read lazily."""
    if size < 1:
        raise ValueError(f"window must be positive, got {size}")
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def file_sha256(path: Path | str) -> str:
    """The SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _update(digest: Any, record: Sequence[str]) -> None:
    digest.update(("\x00".join(record) + "\n").encode("utf-8"))


def _differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))


def _read_record(path: Path, partial: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--resume: {path} not found, so {partial} cannot be continued; delete "
                         f"{partial} and run without --resume") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"--resume: {path}: unreadable progress record ({err})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise InputError(f"--resume: {path}: not a progress record of format {FORMAT}")
    return record


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_start(output: Path | str, *, resume: bool) -> None:
    """Refuse, before anything is loaded, what :func:`write_resumably` would refuse without
    reading the input: a resume with nothing to resume, a fresh start over an interrupted run."""
    output = Path(output)
    if output.is_dir():
        raise InputError(f"{output} is a directory; give the output file's name")
    partial, record_path = partial_path(output), progress_path(output)
    if resume and not partial.exists() and not (record_path.exists() and output.exists()):
        raise InputError(f"--resume: {partial} not found: there is no interrupted run to "
                         "continue; run without --resume")
    if not resume and partial.exists():
        raise InputError(f"{partial} exists (an interrupted run's output): pass --resume to "
                         "continue it, or delete it to start over")


def write_resumably(output: Path | str, records: Iterable[Sequence[str]], *, window: int,
                    render: Callable[[list[Sequence[str]], int], str],
                    fingerprint: dict[str, Any], resume: bool, source: str) -> int:
    """Render ``records`` (one per input line: the line and what goes with it, such as its target
    prefix) a ``window`` at a time into ``output``, resumably (see the module docstring);
    ``render(window_records, first_line_number)`` returns the window's output text. ``source``
    names the input in messages. Returns the number of input lines; InputError (one line) when a
    resume is refused or nothing can be resumed, WriteError when a write fails."""
    output = Path(output)
    partial, record_path = partial_path(output), progress_path(output)
    done, size, recorded_hash = 0, 0, None
    if resume and not partial.exists() and record_path.exists() and output.exists():
        lines = _read_record_quiet(record_path)  # killed after the final rename: complete
        record_path.unlink()
        log.info("%s is complete; nothing to resume", output)
        return lines or 0
    check_start(output, resume=resume)
    if resume:
        record = _read_record(record_path, partial)
        differ = _differences(record.get("options", {}), fingerprint)
        if differ:
            raise InputError(f"--resume: {record_path} was written with other options or another "
                             f"model ({', '.join(differ)} differ); run with the same ones, or "
                             f"delete {partial} to start over")
        done, size, recorded_hash = int(record["lines"]), int(record["bytes"]), record["input_sha256"]
    digest = hashlib.sha256()
    it = iter(records)
    for _ in range(done):
        record_now = next(it, None)
        if record_now is None:
            break
        _update(digest, record_now)
    if resume and digest.hexdigest() != recorded_hash:
        raise InputError(f"--resume: the first {done} lines of {source} are not those the "
                         f"interrupted run translated (see {record_path}); resume with the same "
                         f"input, or delete {partial} to start over")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        f = open(partial, "r+b" if resume else "wb")  # noqa: SIM115 - closed below
    except OSError as err:
        raise WriteError(f"{partial}: could not open ({err.strerror})") from None
    with f:
        if resume:
            if f.seek(0, os.SEEK_END) < size:
                raise InputError(f"--resume: {partial} is shorter than the {size} bytes "
                                 f"{record_path} records; delete both and start over")
            f.truncate(size)
            f.seek(size)

        def save() -> None:
            atomic_write_text(record_path, json.dumps({
                "format": FORMAT, "input": source, "lines": done, "bytes": size,
                "input_sha256": digest.hexdigest(), "options": fingerprint}, sort_keys=True) + "\n")

        if not resume:
            save()
        try:
            for chunk in windows(it, window):
                data = render(chunk, done + 1).encode("utf-8")
                for record_now in chunk:
                    _update(digest, record_now)
                try:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                except OSError as err:
                    raise WriteError(f"{partial}: could not write ({err.strerror}); {record_path} "
                                     "keeps the work done, continue with --resume") from None
                done, size = done + len(chunk), size + len(data)
                save()
        except Exception:
            if done == 0 and not resume:  # nothing done: nothing kept to refuse a rerun over
                f.close()
                partial.unlink(missing_ok=True)
                record_path.unlink(missing_ok=True)
            raise
    os.replace(partial, output)
    _fsync_dir(output.parent)
    record_path.unlink(missing_ok=True)
    return done


def _read_record_quiet(path: Path) -> int | None:
    """Lines done in a progress record, if it can be read (None when not)."""
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["lines"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def model_fingerprint(run_dir: Path | str) -> dict[str, str]:
    """What identifies a model directory for a resume: the SHA-256 of its record and weights (the
    weights' as the run's cache keeps it, read again only when the file may have changed)."""
    from transformer.model_dir.cache import weights_sha256
    from transformer.model_dir.record import CONFIG_FILE
    from transformer.model_dir.weights import WEIGHTS_FILE

    run_dir = Path(run_dir)
    found = {CONFIG_FILE: file_sha256(run_dir / CONFIG_FILE)} if (run_dir / CONFIG_FILE).is_file() else {}
    if (run_dir / WEIGHTS_FILE).is_file():
        found[WEIGHTS_FILE] = weights_sha256(run_dir)
    return found
