"""The command line's parser: short usage errors, and flags named as the user typed them.

:class:`Parser` is the class of the whole parser and of every verb's (argparse's
``parser_class``); :func:`as_typed` rewrites a message so that a flag given by an old spelling
(``--heads``) is named that way rather than by its current name (``--num-heads``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from transformer.cli.common import did_you_mean


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
