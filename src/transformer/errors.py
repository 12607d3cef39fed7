"""Errors that the command line turns into one clear line on stderr and exit status 2."""

from __future__ import annotations

import os


class InputError(ValueError):
    """Bad input from the user: a file, line or value that cannot be used.

    The message must name the file, line or value at fault and fit on one line; the command line
    prints it as ``transformer: error: <message>`` and exits with status 2.
    """


def read_text(path: str | os.PathLike[str], what: str) -> str:
    """The UTF-8 text of ``path``; InputError naming it for a missing or unreadable file
    (``what``: the kind of file, for the message)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise InputError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read the {what} ({first_line(err)})") from None


def first_line(err: BaseException) -> str:
    """An error's first line, for a one-line message; its type's name when it has no text."""
    lines = str(err).strip().splitlines()
    return lines[0].strip() if lines else type(err).__name__


def last_line(err: BaseException) -> str:
    """An error's last line (where PyTorch puts the detail), else as :func:`first_line`."""
    lines = str(err).strip().splitlines()
    return lines[-1].strip() if lines else type(err).__name__


class RunStopped(Exception):
    """Training stopped on purpose before its budget: a signal, or too many bad updates.

    The command line prints the message as one line (``transformer: <message>``) and exits with
    ``exit_status``; the run directory holds the last good checkpoint.
    """

    exit_status = 1

    def __init__(self, message: str, *, exit_status: int | None = None) -> None:
        super().__init__(message)
        if exit_status is not None:
            self.exit_status = exit_status


class WriteError(OSError):
    """A file or directory could not be written (disk full, permissions, I/O error).

    The message names the path and the reason on one line; whatever was there before is intact.
    The command line prints it and exits with status 1.
    """
