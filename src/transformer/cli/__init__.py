"""The ``transformer`` command line: the only package that parses arguments.

One module per verb, each with ``add(subparsers)`` (its flags; configuration flags are declared
once in ``cli.common``) and ``run(args) -> int`` (parse, call one library function, print). Verbs
import their area lazily so ``transformer --help`` stays fast.

Exit status: 0 success, 2 bad usage or bad input (one line on stderr naming the file, line or
value), 1 internal failure.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from transformer.cli import (
    attention,
    average,
    classify,
    config,
    demo,
    evaluate,
    export,
    imports,
    memory,
    plot,
    prepare,
    score,
    serve,
    train,
    translate,
    version,
)
from transformer.cli.common import did_you_mean, emit_json
from transformer.errors import InputError, RunStopped, WriteError

# in workflow order: train, use, look inside, serve, convert (as the help's epilog groups them)
VERBS = (demo, prepare, train, classify, average, memory, config, translate, evaluate, score,
         attention, plot, serve, imports, export, version)
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


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage error is three lines, not the whole usage: the short usage,
    the error (a bad choice lists the choices in one line, with a "did you mean") and where the
    help is. Exit status 2. Subparsers are of the same class (argparse's ``parser_class``)."""

    def error(self, message: str) -> NoReturn:
        formatter = self._get_formatter()
        formatter.add_usage(None, self._get_positional_actions(), [])
        usage = formatter.format_help().strip()
        usage += " [options]" if len(self._get_optional_actions()) > 1 else ""
        self.exit(2, f"{usage}\n{self.prog}: error: {message}\nsee `{self.prog} --help`\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}; {did_you_mean(value, action.choices)}")


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
    """Run the command line on ``argv`` (default: sys.argv); returns the exit status (a rank of a
    distributed run ends the process with it instead: see ``distributed.end_process``)."""
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
    status = _run(args, typed=list(sys.argv[1:] if argv is None else argv), parser=parser)
    distributed = sys.modules.get("transformer.training.distributed")
    return distributed.end_process(status) if distributed is not None else status


def _aliases(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Every flag's old spellings (``--num-heads``: ``--heads``), over all verbs."""
    found: dict[str, dict[str, None]] = {}  # flag -> its old spellings, in order, once each

    def walk(p: argparse.ArgumentParser) -> None:
        for action in p._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for sub in action.choices.values():
                    walk(sub)
            names = [n for n in action.option_strings
                     if n.startswith("--") and not n.startswith("--no-")]
            for old in names[1:]:
                found.setdefault(names[0], {})[old] = None

    walk(parser)
    return {flag: list(old) for flag, old in found.items()}


def as_typed(message: str, typed: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """``message`` with each flag named as the user typed it: an old spelling they used
    (``--heads``) instead of the flag's name (``--num-heads``)."""
    given = {word.partition("=")[0] for word in typed if word.startswith("--")}
    for flag, old in _aliases(parser).items():
        used = [name for name in old if name in given]
        if used and flag not in given:
            message = re.sub(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", used[0], message)
    return message


def _run(args: argparse.Namespace, *, typed: Sequence[str] = (),
         parser: argparse.ArgumentParser | None = None) -> int:
    """The exit status of the parsed verb: its handler's, or the one its error calls for."""
    try:
        return int(args.handler(args) or 0)
    except InputError as err:
        message = str(err) if parser is None else as_typed(str(err), typed, parser)
        print(f"transformer: error: {message}", file=sys.stderr)
        return 2
    except RunStopped as err:  # a signal or a diverged run: the checkpoint on disk is good
        print(f"transformer: {err}", file=sys.stderr)
        return err.exit_status
    except WriteError as err:
        print(f"transformer: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("transformer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
