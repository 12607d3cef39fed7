"""``transformer average``: checkpoint averaging (section 6.1 of the paper)."""

from __future__ import annotations

import argparse

from transformer.cli.common import add_json, emit_json
from transformer.errors import InputError


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "average",
        help="average the parameters of several model directories, or of a run's last snapshots",
        description="Checkpoint averaging (section 6.1 of the paper): every parameter of the new "
        "model is the mean over the given model directories, which must share configuration and "
        "tokenizers; or, with --last N and one run directory, over the weights that run kept of "
        "its last N evaluations (train --average-last).",
    )
    p.add_argument("--models", nargs="+", required=True, metavar="RUN_DIR",
                   help="model directories to average (at least two), or one run with --last")
    p.add_argument("--last", type=int, metavar="N", help="average the run's newest N snapshots")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="where to write the average")
    p.add_argument("--overwrite", action="store_true", help="replace a model already in --out")
    add_json(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from transformer.training.average import average_model_dirs, average_snapshots

    out = Path(args.out)
    if args.last is not None:
        if len(args.models) != 1:
            raise InputError(f"--last averages the snapshots of one run, got {len(args.models)} "
                             "model directories")
        summary = average_snapshots(args.models[0], out, last=args.last, overwrite=args.overwrite)
        what = f"the last {args.last} snapshots (updates {', '.join(map(str, summary['steps']))})"
    else:
        summary = average_model_dirs(args.models, out, overwrite=args.overwrite)
        what = f"{len(summary['averaged_from'])} models ({summary['parameters']:,} parameters)"
    if args.json:
        emit_json(summary)
    else:
        print(f"averaged {what} into {summary['out']}")
    return 0
