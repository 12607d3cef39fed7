"""``transformer version``: the package and PyTorch versions."""

from __future__ import annotations

import argparse

from transformer.cli.common import add_json, emit_json


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("version", help="print the package and PyTorch versions")
    add_json(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from transformer import __version__

    info = {"transformer": __version__, "torch": torch.__version__}
    if args.json:
        emit_json(info)
    else:
        print(f"transformer {info['transformer']} (torch {info['torch']})")
    return 0
