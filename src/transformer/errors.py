"""Errors that the command line turns into one clear line on stderr and exit status 2."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from the user: a file, line or value that cannot be used.

    The message must name the file, line or value at fault and fit on one line; the command line
    prints it as ``transformer: error: <message>`` and exits with status 2.
    """
