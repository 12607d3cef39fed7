"""The ``transformer`` command line. The only module that parses arguments.

Each verb has an ``_add_<verb>`` function that declares its arguments and sets ``handler`` to a
function ``(args) -> int``; handlers import their area lazily so ``transformer --help`` stays fast.

Exit status: 0 success, 2 bad usage or bad input (one line on stderr naming the file, line or
value), 1 internal failure.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from transformer.errors import InputError

log = logging.getLogger("transformer")


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout (every verb's ``--json``)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n")
    sys.stdout.flush()


def _add_version(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("version", help="print the package and PyTorch versions")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(args: argparse.Namespace) -> int:
        import torch

        from transformer import __version__

        info = {"transformer": __version__, "torch": torch.__version__}
        if args.json:
            emit_json(info)
        else:
            print(f"transformer {info['transformer']} (torch {info['torch']})")
        return 0

    p.set_defaults(handler=run)


VERBS: list[Callable[[argparse._SubParsersAction], None]] = [_add_version]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer",
        description='The Transformer of "Attention Is All You Need": train, translate, evaluate, '
        "classify and look inside.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for add in VERBS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    if not hasattr(args, "handler"):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args) or 0)
    except InputError as err:
        print(f"transformer: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("transformer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
