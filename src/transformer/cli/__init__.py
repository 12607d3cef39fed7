"""The ``transformer`` command line: the only package that parses arguments.

One module per verb, each with ``add(subparsers)`` (its flags; configuration flags are declared
once in ``cli.common``) and ``run(args) -> int`` (parse, call one library function, print). Verbs
import their area lazily so ``transformer --help`` stays fast. A verb whose process may have to
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

from transformer.cli import (
    attention,
    average,
    classify,
    config,
    demo,
    evaluate,
    export,
    import_model,
    memory,
    plot,
    prepare,
    score,
    serve,
    train,
    translate,
    version,
)
from transformer.cli.common import emit_json
from transformer.cli.errors import run_handler
from transformer.cli.parser import Parser

# in workflow order: train, use, look inside, serve, convert (as the help's epilog groups them)
VERBS = (demo, prepare, train, classify, average, memory, config, translate, evaluate, score,
         attention, plot, serve, import_model, export, version)
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

__all__ = ["build_parser", "emit_json", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of every verb; a parsed verb carries its ``handler``."""
    parser = Parser(
        prog="transformer",
        description='The Transformer of "Attention Is All You Need": train, translate, evaluate,\n'
        "classify and look inside.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in VERBS:
        verb.add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: sys.argv); returns the exit status, unless the
    verb's ``end_process`` ends the process with it (a rank of a distributed ``train``)."""
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
    status = run_handler(args, typed=list(sys.argv[1:] if argv is None else argv), parser=parser)
    end_process = getattr(args, "end_process", None)
    return status if end_process is None else end_process(status)
