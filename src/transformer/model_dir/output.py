"""Where a library writer puts a whole directory: a model directory (``import_marian``,
``average_model_dirs``, ``average_snapshots``) or an export (CTranslate2, MarianMT).

Something already there is refused unless the caller passes ``overwrite=True`` (the command
line's ``--overwrite``): the guard lives in the library, as in CTranslate2's
``Converter.convert(output_dir, force=)``, so a call from Python can no more replace a model by
accident than the command line can. Training's own run directory is not guarded here: ``train``
and ``classify train`` have their own ``--overwrite`` and run lock.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from transformer.atomic import replace_dir
from transformer.errors import InputError
from transformer.model_dir.record import CONFIG_FILE


def check_model_out(out: str | os.PathLike[str], *, overwrite: bool) -> Path:
    """``out`` as a Path, when a model directory may be written there: it is missing or an empty
    directory, or ``overwrite`` is set (the model's files then replace theirs; other files stay).

    InputError naming ``out`` otherwise, before anything is read or written: ``OUT already holds
    a model; pass --overwrite to replace it``, or for a directory holding something else
    ``OUT: exists and is not an empty directory; pass --overwrite to write the model into it``.
    """
    out = Path(out)
    if overwrite or not out.is_dir() or not any(out.iterdir()):
        return out  # a file at ``out`` is the writer's to refuse: it names the path at fault
    if (out / CONFIG_FILE).exists():
        raise InputError(f"{out} already holds a model; pass --overwrite to replace it")
    raise InputError(f"{out}: exists and is not an empty directory; pass --overwrite to write "
                     "the model into it")


def check_new_dir(out: str | os.PathLike[str], *, overwrite: bool) -> Path:
    """``out`` as a Path, when a whole directory may be put there: it is missing or an empty
    directory, or with ``overwrite`` a directory whose content is then replaced as a whole.

    InputError naming ``out`` otherwise: ``OUT: exists and is not an empty directory`` (also, with
    or without ``overwrite``, when ``out`` is a file), or ``OUT: PARENT is not a directory``.
    """
    out = Path(out)
    if out.exists() and (not out.is_dir() or (not overwrite and any(out.iterdir()))):
        raise InputError(f"{out}: exists and is not an empty directory")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{out}: {parent} is not a directory")
            break
    return out


def write_new_dir(out: str | os.PathLike[str], fill: Callable[[Path], None], *,
                  overwrite: bool = False) -> Path:
    """Fill ``out`` through ``fill(tmp)`` atomically (:func:`transformer.atomic.replace_dir`) once
    :func:`check_new_dir` allows it: InputError, before anything is written, when it does not.
    Returns ``out`` as a Path."""
    out = check_new_dir(out, overwrite=overwrite)
    replace_dir(out, fill)
    return out
