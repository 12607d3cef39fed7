"""``transformer plot``: the positional encoding, or a run's training curves."""

from __future__ import annotations

import argparse

from transformer.cli.common import emit_json
from transformer.errors import InputError


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw the positional encoding or a run's training curves")
    kinds = p.add_subparsers(dest="plot", metavar="WHAT", required=True)
    pos = kinds.add_parser("positional", help="the sinusoidal positional encoding as a heat map")
    pos.add_argument("--d-model", type=int, default=128, help="dimensions (default 128)")
    pos.add_argument("--max-len", type=int, default=64, help="positions (default 64)")
    curves = kinds.add_parser("curves", help="loss, learning rate and BLEU from metrics.jsonl")
    curves.add_argument("run_dir", metavar="RUN_DIR", nargs="+",
                        help="model directory (or a metrics file); several are drawn together")
    curves.add_argument("--x", choices=("step", "minutes"), default="step",
                        help="horizontal axis: update step (default) or minutes of training")
    for q, default in ((pos, "positional.png"), (curves, "curves.png")):
        q.add_argument("--out", default=default, help=f"picture file (default {default})")
        q.add_argument("--svg", action="store_true", help="also write an SVG beside the picture")
        q.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from transformer.visualization.figures import save_figure

    if args.plot == "positional":
        for flag, value in (("--d-model", args.d_model), ("--max-len", args.max_len)):
            if value < 1 or value > 100_000:
                raise InputError(f"{flag} must be between 1 and 100000, got {value}")
        from transformer.model import sinusoidal_table
        from transformer.visualization.positional import plot_positional_encoding

        fig = plot_positional_encoding(sinusoidal_table(args.max_len, args.d_model))
    else:
        from transformer.visualization.curves import plot_runs

        fig = plot_runs(args.run_dir, x=args.x)
    files = [str(f) for f in save_figure(fig, args.out, svg=args.svg)]
    if args.json:
        emit_json({"plot": args.plot, "files": files})
    else:
        for f in files:
            print(f"wrote {f}")
    return 0
