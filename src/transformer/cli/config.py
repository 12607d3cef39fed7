"""``transformer config show PRESET [FLAGS]``: the configuration a training command would run.

The flags are those of ``train`` (or, for a classifier preset, ``classify train``), parsed by that
verb's own parser, so the printed JSON is exactly the ``"task"`` and ``"training"`` sections its
``config.json`` would hold: the preset, then the flags.
"""

from __future__ import annotations

import argparse
import json

from transformer.config.presets import CLASSIFIER_PRESETS, TRANSLATION_PRESETS
from transformer.errors import InputError

TASKS = ("translation", "classification")


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "config",
        help="show the resolved configuration of a preset, flags applied",
        description="Configuration of the training verbs.",
    )
    verbs = p.add_subparsers(dest="config_verb", metavar="SUBVERB")
    show = verbs.add_parser(
        "show", help="print the configuration a training command would run, as JSON",
        description="Print the configuration `transformer train --preset PRESET FLAGS` (or "
        "`classify train` for a classifier preset) would run, as the \"task\" and \"training\" "
        "sections of the config.json it would write. Every default of the form \"(default: the "
        "preset's)\" is shown here. Example: transformer config show multi30k-cpu --d-model 256",
    )
    names = tuple(dict.fromkeys((*TRANSLATION_PRESETS, *CLASSIFIER_PRESETS)))
    show.add_argument("preset", choices=names, metavar="PRESET",
                      help=f"a preset or recipe: {', '.join(names)}")
    show.add_argument("--task", choices=TASKS, help="translation (train) or classification "
                      "(classify train); default: the task the preset belongs to, translation "
                      "when it is both")
    show.add_argument("flags", nargs=argparse.REMAINDER, metavar="FLAGS",
                      help="any flags of train (classify train) that change the configuration")

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(handler=usage)
    show.set_defaults(handler=run)


def task_of(preset: str, task: str | None) -> str:
    """The task a preset is shown for: the one asked, else the one it belongs to."""
    if task is None:
        return "translation" if preset in TRANSLATION_PRESETS else "classification"
    known = TRANSLATION_PRESETS if task == "translation" else CLASSIFIER_PRESETS
    if preset not in known:
        raise InputError(f"--task {task}: {preset} is not a {task} preset; those are "
                         f"{', '.join(known)}")
    return task


def resolved(preset: str, flags: list[str], task: str | None = None) -> dict[str, object]:
    """``{"task", "training"}`` of the training command ``preset`` and ``flags`` describe."""
    from transformer.cli import build_parser, classify, train

    task = task_of(preset, task)
    verb = ["train"] if task == "translation" else ["classify", "train"]
    args = build_parser(verb[0]).parse_args([*verb, "--preset", preset, *flags])
    config = train.config_of(args) if task == "translation" else classify.config_of(args)[0]
    return {"task": task, "training": config.to_dict()}  # type: ignore[attr-defined]


def _take_task(flags: list[str], task: str | None) -> tuple[list[str], str | None]:
    """``--task`` given after PRESET (where the training flags are gathered) taken out of them."""
    rest: list[str] = []
    it = iter(flags)
    for flag in it:
        if flag == "--task" or flag.startswith("--task="):
            task = flag.partition("=")[2] if "=" in flag else next(it, "")
            if task not in TASKS:
                raise InputError(f"--task {task!r}: choose from {', '.join(TASKS)}")
        else:
            rest.append(flag)
    return rest, task


def run(args: argparse.Namespace) -> int:
    flags, task = _take_task(args.flags, args.task)
    print(json.dumps(resolved(args.preset, flags, task), indent=2, ensure_ascii=False))
    return 0
