"""``transformer demo``: the whole job on the built-in number-words task, in minutes on a CPU."""

from __future__ import annotations

import argparse

from transformer.cli.common import (
    add_training_run,
    as_input_error,
    emit_json,
    overrides,
    progress,
    set_threads,
)
from transformer.config.presets import DEMO_PRESET
from transformer.errors import InputError


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="train on the built-in number-words task, show translations and attention",
        description="The whole job in a few minutes on a CPU: trains a small Transformer to turn "
        "English number words into German ones, prints test translations beside their references "
        "and the exact-match accuracy, and draws the cross-attention of one example.",
    )
    run_settings = DEMO_PRESET.run
    p.add_argument("--out", default="runs/demo", metavar="RUN_DIR",
                   help="run directory (default runs/demo)")
    p.add_argument("--minutes", dest="set:minutes", type=float, metavar="MINUTES",
                   help=f"training time budget (default {run_settings['minutes']})")
    p.add_argument("--max-steps", dest="set:max_steps", type=int, metavar="MAX_STEPS",
                   help=f"optimizer updates (default {run_settings['max_steps']})")
    p.add_argument("--seed", dest="set:seed", type=int, metavar="SEED",
                   help=f"random seed of data and training (default {run_settings['seed']})")
    add_training_run(p, threads_default=1, threads_note="the demo's model is so small that more "
                     "threads gain little, and lose much on a CPU shared with other work")
    p.set_defaults(handler=run)


def config_of(args: argparse.Namespace) -> object:
    """The demo's TranslationTrainConfig: the demo preset with the flags given."""
    from transformer.config.presets import demo_config

    changes = overrides(args)
    if changes.get("minutes", 1) <= 0:
        raise InputError(f"--minutes must be positive, got {changes['minutes']}")
    if changes.get("max_steps", 1) < 1:
        raise InputError(f"--max-steps must be at least 1, got {changes['max_steps']}")
    return as_input_error(lambda: demo_config(changes))


def run(args: argparse.Namespace) -> int:
    from transformer.training.demo import run_demo

    # One thread by default: the model is so small that a second one gains little, and loses a
    # lot when the CPU is shared with other work.
    set_threads(args.threads)
    config = config_of(args)
    summary = as_input_error(lambda: run_demo(config=config, run_dir=args.out, device=args.device,
                                              progress=progress(args)))
    if args.json:
        emit_json(summary)
        return 0
    test = summary["test"]
    print(f"Trained a {summary['parameters']:,}-parameter Transformer on English -> German number "
          f"words: {summary['steps']} updates in {summary['train_s']:.0f}s ({summary['device']}).")
    print()
    width = max(len(e["source"]) for e in summary["examples"])
    for e in summary["examples"]:
        mark = "ok" if e["correct"] else f"expected {e['reference']}"
        print(f"  {e['source']:<{width}}  ->  {e['translation']}   [{mark}]")
    print()
    # BLEU is left out: a German number is one word, so there are no 4-grams to match
    print(f"Test split: exact match {test['exact_match']:.1%} of {test['num_examples']} numbers "
          f"(chrF {test['chrf']:.1f}).")
    print(f"Attention map of \"{summary['attention']['source']}\": {summary['attention']['path']}")
    print(f"Run directory: {summary['run_dir']} (try: transformer translate --model "
          f"{summary['run_dir']})  [{summary['total_s']:.0f}s in all]")
    print(f"Serve it with its web page: transformer serve --model demo={summary['run_dir']}")
    return 0
