"""The ``transformer`` command line: the only package that parses arguments.

One module per verb, each with ``add(subparsers)`` (its flags; configuration flags are declared
once in ``cli.common``) and ``run(args) -> int`` (parse, call one library function, print). A
command imports what it runs: the top-level help lists the verbs from the table :data:`VERBS`, a
command builds only its own verb's parser, and verbs import their area (PyTorch) lazily, so that
``transformer --help`` answers at once and a path that needs no tensor never loads one. A verb whose process may have to
end elsewhere than here (a rank of a distributed ``train``) also sets ``end_process``, a function
of the exit status that returns it or ends the process with it.

Exit status: 0 success, 2 bad usage or bad input (one line on stderr naming the file, line or
value), 1 internal failure (:mod:`transformer.cli.errors`). The parser: :mod:`transformer.cli.parser`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib import import_module

from transformer.cli.common import emit_json
from transformer.cli.errors import run_handler
from transformer.cli.parser import Parser
from transformer.cli.verbs import VERBS, Verb, verb_in

EPILOG = """\
workflows (one example each; `transformer VERB --help` for the rest):
  train        transformer train --preset multi30k-cpu --threads 2 --out runs/m30k
               also: demo (a small model in minutes), prepare (big data), classify train,
               average, memory, config show (what a preset and flags resolve to)
  use          transformer translate --model runs/m30k "A man is riding a bike."
               also: evaluate (BLEU, chrF), classify predict, classify evaluate
  look inside  transformer attention --model runs/m30k "A man is riding a bike."
               also: plot positional, plot curves
  serve        transformer serve --model runs/m30k --port 8000
  convert      transformer export ctranslate2 --model runs/m30k --out m30k-ct2
               also: export huggingface, import marian
"""

__all__ = ["VERBS", "Verb", "build_parser", "emit_json", "main", "verb_in"]


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The parser: of every verb when ``verb`` is None (the docs and tests walk it), else of that
    verb alone, the others listed by name and summary without importing their modules. A parsed
    verb carries its ``handler``."""
    parser = Parser(
        prog="transformer",
        description='The Transformer of "Attention Is All You Need": train, translate, evaluate,\n'
        "classify and look inside.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for each in VERBS:
        if verb is None or each.name == verb:
            import_module(f"transformer.cli.{each.module}").add(sub)
        else:
            sub.add_parser(each.name, help=each.summary, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: sys.argv); returns the exit status, unless the
    verb's ``end_process`` ends the process with it (a rank of a distributed ``train``)."""
    typed = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(verb_in(typed) or "")  # no verb: the verbs listed, none built
    args = parser.parse_args(typed)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    if not hasattr(args, "handler"):
        parser.print_help(sys.stderr)
        return 2
    status = run_handler(args, typed=typed, parser=parser)
    end_process = getattr(args, "end_process", None)
    return status if end_process is None else end_process(status)
