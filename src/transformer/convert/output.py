"""Where an exporter writes: a new (or empty) directory, filled beside and swapped into place."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from transformer.atomic import replace_dir
from transformer.errors import InputError


def write_new_dir(out: str | os.PathLike[str], fill: Callable[[Path], None]) -> Path:
    """Fill ``out`` through ``fill(tmp)`` atomically (:func:`transformer.atomic.replace_dir`).
    InputError, before anything is written, when ``out`` holds something or lies under a file."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out}: exists and is not an empty directory")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{out}: {parent} is not a directory")
            break
    replace_dir(out, fill)
    return out
