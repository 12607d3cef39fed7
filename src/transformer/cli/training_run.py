"""What the two training verbs (``train`` and ``classify train``) share about a run's lifecycle:
``--resume RUN_DIR|auto``, the flags a plain ``--resume`` refuses, and how a rank's process ends.

Beside ``--resume RUN_DIR`` only how the run goes may be given (its device, threads, progress
bar, output) and the fields that may change on resume (``RESUME_FIELDS``: the budget, how often
it saves); every other flag would train another model and is refused in one line. The flags come
from the verb's parser itself (:func:`add_resume` records them), so a new flag is refused without
a list to keep.
"""

from __future__ import annotations

import argparse
from typing import Any

from transformer.cli.common import KEY, no_preset_with_config, overrides
from transformer.config.runs import RESUME_FIELDS
from transformer.errors import InputError

# the options that say how a resumed run goes, not what it trains
HOW_TO_RUN = ("resume", "device", "threads", "progress", "json")
RESUME_FLAGS = ", ".join("--" + name.replace("_", "-") for name in RESUME_FIELDS)


def add_resume(p: argparse.ArgumentParser, group: Any, *, what: str) -> None:
    """``--resume RUN_DIR|auto`` on ``group`` of the verb's parser ``p`` (kept in the arguments
    for :func:`refuse_beside_resume`). ``what``: what a resume continues on (for the help)."""
    group.add_argument("--resume", metavar="RUN_DIR|auto", help=(
        f"continue this run exactly, {what}; of the other flags only {RESUME_FLAGS} may be "
        "given. 'auto': resume --out when it holds a checkpoint of this configuration, else "
        "start it (the same command for the first start and every restart)"))
    p.set_defaults(verb_parser=p)


def refuse_beside_resume(args: argparse.Namespace) -> None:
    """InputError naming the first flag given beside ``--resume RUN_DIR`` that would change the
    run (see the module docstring)."""
    keeps = {*HOW_TO_RUN, *(KEY + name for name in RESUME_FIELDS)}
    defaults: dict[str, tuple[str, Any]] = {}  # per destination its first flag and its default
    for action in args.verb_parser._actions:  # noqa: SLF001
        if action.option_strings and action.dest not in keeps:
            defaults.setdefault(action.dest, (action.option_strings[0], action.default))
    for dest, (flag, default) in defaults.items():
        if getattr(args, dest, default) != default:
            raise InputError(f"--resume continues with the stored configuration and data; {flag} "
                             f"cannot change (only {RESUME_FLAGS} can; --resume auto takes the "
                             "whole command)")


def resume_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``RESUME_FIELDS`` the command changes (None: unchanged) beside
    ``--resume RUN_DIR``; first :func:`refuse_beside_resume` refuses any flag that would change
    the run."""
    refuse_beside_resume(args)
    changes = overrides(args)
    return {key: changes.get(key) for key in RESUME_FIELDS}


def config_file(args: argparse.Namespace, *, task: str, changes: dict[str, Any]) -> Any:
    """The run's configuration from ``--config FILE`` (a whole one: refused beside ``--preset``)
    with the flags' ``changes``, or None without ``--config``; ``task``: ``translation`` or
    ``classification``, what the file must hold."""
    no_preset_with_config(args)
    if args.config is None:
        return None
    from transformer.config.files import run_config_from_file

    return run_config_from_file(args.config, task=task, overrides=changes)


def end_rank(status: int) -> int:
    """How a training verb's process ends (the entry's ``end_process``): with ``status``
    returned, or, in a rank that joined a distributed group, the process ended here with it
    (:func:`transformer.training.distributed.end_process`)."""
    from transformer.training import distributed  # already imported by the verb

    return distributed.end_process(status)
