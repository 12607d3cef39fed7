"""MkDocs hook: the command-line reference page, generated from the argparse parsers.

``reference/cli.md`` holds the marker ``<!-- cli-reference -->``; at build time it is replaced by
one section per verb (its one-line summary and its full ``--help``), read from
``transformer.cli.build_parser()``, so the page cannot drift from the parsers.
tests/docs/test_cli_reference.py checks that every verb and flag appears.

It also turns the Sphinx roles of the docstrings (``:meth:`decode```, ``:class:`~a.b.C```), which
the API reference renders as they are, into plain code: ``decode``, ``C``.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- cli-reference -->"
PAGE = "reference/cli.md"
WIDTH = "100"  # argparse reads $COLUMNS: a fixed width makes the page the same on every machine


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command, in the parser's order, aliases once."""
    out: list[tuple[str, str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    out.append((name, helps.get(name, ""), sub))
    return out


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
         ) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """Every verb with its parser, depth first: (("classify", "train"), help, parser), ..."""
    for name, summary, sub in _subcommands(parser):
        yield (*path, name), summary, sub
        yield from walk(sub, (*path, name))


def help_text(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def anchor(path: tuple[str, ...]) -> str:
    return "transformer-" + "-".join(path)


def render() -> str:
    """The generated part of the page: an index table, then each verb's help."""
    from transformer.cli import build_parser

    top = build_parser()
    verbs = list(walk(top))
    lines = ["| verb | does |", "| --- | --- |"]
    for path, summary, _ in verbs:
        lines.append(f"| [`transformer {' '.join(path)}`](#{anchor(path)}) | {summary} |")
    lines += ["", "## `transformer`", "", "```text", help_text(top), "```", ""]
    for path, summary, sub in verbs:
        lines += [f"## `transformer {' '.join(path)}` {{#{anchor(path)}}}", ""]
        if summary:
            lines += [summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else "."), ""]
        lines += ["```text", help_text(sub), "```", ""]
    return "\n".join(lines)


ROLE = re.compile(r":(?:meth|class|func|data|attr|mod|exc):<code>(~?)([^<]+)</code>")


def plain_roles(html: str) -> str:
    """``:meth:<code>x</code>`` -> ``<code>x</code>``; ``~a.b.C`` keeps its last part, as Sphinx."""
    return ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>", html)


def on_page_content(html: str, **_: Any) -> str:
    return plain_roles(html)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == PAGE:
        if MARKER not in markdown:
            raise ValueError(f"{PAGE} has lost its marker {MARKER}")
        return markdown.replace(MARKER, render())
    return markdown
