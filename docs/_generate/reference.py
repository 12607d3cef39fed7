"""The two reference pages made from the code, committed as Markdown so that GitHub shows them as the
site does: ``docs/reference/cli.md`` from the argparse parsers, ``docs/reference/python-api.md``
from the docstrings.

A page is prose written by hand around generated regions, each between two HTML comments (unseen
on GitHub and on the site):

    <!-- generated: cli -->                             every verb and flag (cli.md)
    <!-- /generated -->
    <!-- generated: api transformer.config.ModelConfig -->   one object, its signature and docstring
    <!-- /generated -->

``make docs-reference`` (``python docs/_generate/reference.py``) rewrites the regions in place;
``--check`` only says which page is stale. tests/docs/test_reference.py fails when a committed
page differs from what this writes. To list one more object, add its two comments to
python-api.md and run ``make docs-reference``.

The output depends on neither the terminal's width nor the Python version: flags are read from the
parsers' actions, not from argparse's help formatter, and signatures are written from
``inspect.signature`` with the annotations as the source spells them.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1]
CLI_PAGE = DOCS / "reference" / "cli.md"
API_PAGE = DOCS / "reference" / "python-api.md"
REGION = re.compile(r"(<!-- generated: (?P<what>[^>]*?) -->\n)(?P<body>.*?)(<!-- /generated -->)",
                    re.S)
SHARED = ("--device", "--threads", "--precision", "--progress", "--json")  # the shared-flags table
WIDTH = 96  # a signature longer than this gets one parameter a line


# --- the command line ----------------------------------------------------------------------------

def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command, in the parser's order, aliases once."""
    out: list[tuple[str, str, argparse.ArgumentParser]] = []
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            helps = {a.dest: a.help or "" for a in action._choices_actions}  # noqa: SLF001
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


def anchor(path: tuple[str, ...]) -> str:
    """The heading ``transformer classify train``'s anchor, the same on GitHub and MkDocs."""
    return "transformer-" + "-".join(path)


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes and angle brackets escaped."""
    text = " ".join(text.split())
    return text.replace("|", "\\|").replace("<", "&lt;")


def flag_usage(action: argparse.Action) -> str:
    """``-i FILE, --input FILE``, ``--precision {auto,fp32}``, ``--adam-betas B1 B2``, ``--json``."""
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    if action.choices is not None and action.metavar is None:
        value = "{" + ",".join(map(str, action.choices)) + "}"
    elif isinstance(action.metavar, tuple):
        value = " ".join(action.metavar)
    else:
        value = action.metavar or action.dest.upper()
    if not action.option_strings:
        return value
    if action.nargs in ("*", "+"):
        value = f"{value} [{value} ...]"
    return ", ".join(f"{flag} {value}" for flag in action.option_strings)


def _shown(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS and not isinstance(
        action, argparse._SubParsersAction | argparse._HelpAction)  # noqa: SLF001


def _flag_tables(parser: argparse.ArgumentParser) -> list[str]:
    lines: list[str] = []
    for group in parser._action_groups:  # noqa: SLF001
        actions = [a for a in group._group_actions if _shown(a)]  # noqa: SLF001
        if not actions:
            continue
        title = {"positional arguments": "arguments"}.get(group.title or "", group.title or "")
        lines += [f"**{_cell(title)}**", "", "| flag | meaning |", "| --- | --- |"]
        lines += [f"| `{_cell(flag_usage(a))}` | {_cell(a.help or '')} |" for a in actions]
        lines.append("")
    return lines


def _shared_cell(action: argparse.Action | None) -> str:
    """What a shared flag is in one verb: its default, in the words of its help where it has none."""
    if action is None:
        return "-"
    if action.dest == "json":
        return "one object per input line" if "per input line" in (action.help or "") else "one object"
    if action.default not in (None, False):
        return f"`{action.default}`"
    named = re.match(r"(\w+) \(default\)", action.help or "")  # "auto (default): ..."
    if named:
        return f"`{named[1]}`"
    said = re.search(r"\(default:? ([^);]+)", action.help or "")  # "... (default: PyTorch's)"
    return _cell(said[1]) if said else "yes"


def shared_flags_table(verbs: list[tuple[tuple[str, ...], str, argparse.ArgumentParser]]) -> list[str]:
    """Which verb takes which of the flags most verbs share, and with what default."""
    lines = ["| verb | " + " | ".join(f"`{f}`" for f in SHARED) + " |",
             "| --- |" + " --- |" * len(SHARED)]
    for path, _, parser in verbs:
        flags = parser._option_string_actions  # noqa: SLF001
        if _subcommands(parser) or not any(f in flags for f in SHARED):
            continue
        cells = [_shared_cell(flags.get(f)) for f in SHARED]
        lines.append(f"| `{' '.join(path)}` | " + " | ".join(cells) + " |")
    return lines


def render_cli() -> str:
    """The generated part of cli.md: the verbs, the shared flags, then each verb's flags."""
    from transformer.cli import build_parser

    top = build_parser()
    verbs = list(walk(top))
    lines = ["| verb | does |", "| --- | --- |"]
    lines += [f"| [`transformer {' '.join(p)}`](#{anchor(p)}) | {_cell(s)} |" for p, s, _ in verbs]
    lines += ["", "## Flags shared by several verbs", "",
              "A dash: the verb has no such flag. A default in words is the verb's own help.", ""]
    lines += shared_flags_table(verbs)
    lines += ["", "## `transformer`", "", " ".join((top.description or "").split()), ""]
    lines += _flag_tables(top)
    lines += ["```text", (top.epilog or "").rstrip(), "```", ""]
    for path, summary, sub in verbs:
        lines += [f"## `transformer {' '.join(path)}`", ""]
        text = " ".join((sub.description or summary).split())
        if text:
            lines += [text[0].upper() + text[1:] + ("" if text.endswith(".") else "."), ""]
        lines += _flag_tables(sub)
    return "\n".join(lines).rstrip() + "\n"


# --- the Python API ------------------------------------------------------------------------------

ROLE = re.compile(r":(?:meth|class|func|data|attr|mod|exc):`(~?)([^`]+)`")


def plain_roles(text: str) -> str:
    """Sphinx roles and reST literals as Markdown code: ``:meth:`~a.b.c``` -> `c`, ````x```` -> `x`."""
    text = ROLE.sub(lambda m: f"`{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}`", text)
    return re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)


def _annotation(value: Any) -> str:
    """An annotation as the source spells it (``"Path"`` quoted under postponed evaluation: Path)."""
    if not isinstance(value, str):
        return inspect.formatannotation(value)
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" else value


def _parameter(param: inspect.Parameter) -> str:
    prefix = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
    text = prefix + param.name
    if param.annotation is not param.empty:
        text += f": {_annotation(param.annotation)}"
    if param.default is not param.empty:
        default = param.default
        # a function's repr holds its address, which changes at every run: its name does not
        shown = default.__qualname__ if inspect.isfunction(default) else repr(default)
        text += (" = " if param.annotation is not param.empty else "=") + shown
    return text


def signature(name: str, function: Callable[..., Any], *, drop_self: bool = False,
              returns: bool = True) -> str:
    """``name(a: int, *, b: str = 'x') -> T``, one parameter a line when it is long."""
    sig = inspect.signature(function)
    params = list(sig.parameters.values())[1 if drop_self else 0:]
    parts: list[str] = []
    for i, param in enumerate(params):
        if param.kind == param.KEYWORD_ONLY and (i == 0 or params[i - 1].kind < param.KEYWORD_ONLY):
            parts.append("*")
        parts.append(_parameter(param))
        if param.kind == param.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind
                                                    != param.POSITIONAL_ONLY):
            parts.append("/")
    tail = ""
    if returns and sig.return_annotation is not sig.empty:
        tail = f" -> {_annotation(sig.return_annotation)}"
    one_line = f"{name}({', '.join(parts)}){tail}"
    if len(one_line) <= WIDTH:
        return one_line
    return f"{name}(\n" + "".join(f"    {part},\n" for part in parts) + f"){tail}"


def _resolve(dotted: str) -> Any:
    module, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):  # a class's member: transformer.x.Class.method
        return getattr(_resolve(module), attr)


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties a class defines itself, with a docstring, in source order."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        function = value.__func__ if isinstance(value, classmethod | staticmethod) else value
        documented = inspect.getdoc(value if isinstance(value, property) else function)
        if (isinstance(value, property) or inspect.isfunction(function)) and documented:
            yield name, value


def _member(cls: type, name: str, value: Any) -> list[str]:
    if isinstance(value, property):
        return [f"#### `{cls.__name__}.{name}`", "", "*property*", "",
                plain_roles(inspect.getdoc(value) or ""), ""]
    function = value.__func__ if isinstance(value, classmethod | staticmethod) else value
    drop = not isinstance(value, staticmethod)
    kind = "*classmethod*\n\n" if isinstance(value, classmethod) else ""
    return [f"#### `{cls.__name__}.{name}`", "", "```python",
            signature(f"{cls.__name__}.{name}", function, drop_self=drop), "```", "",
            kind + plain_roles(inspect.getdoc(function) or ""), ""]


def render_api(dotted: str) -> str:
    """One object of the API page: its heading, import, signature, docstring and members."""
    obj = _resolve(dotted)
    module, _, name = dotted.rpartition(".")
    lines = [f"### `{name}`", "", f"`from {module} import {name}`", ""]
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        lines += [f"*exception*, a `{obj.__mro__[1].__name__}`", ""]
    elif callable(obj):
        lines += ["```python", signature(name, obj, returns=not inspect.isclass(obj)), "```", ""]
    doc = inspect.getdoc(obj)
    if doc and not doc.startswith(f"{name}("):  # not the docstring dataclasses make up
        lines += [plain_roles(doc), ""]
    if inspect.isclass(obj):
        for member, value in _members(obj):
            lines += _member(obj, member, value)
    return "\n".join(lines).rstrip() + "\n"


# --- the pages -----------------------------------------------------------------------------------

def fill(page: str) -> str:
    """``page`` with every generated region written anew."""
    def one(match: re.Match[str]) -> str:
        what = match["what"].split()
        if what == ["cli"]:
            body = render_cli()
        elif len(what) == 2 and what[0] == "api":
            body = render_api(what[1])
        else:
            raise ValueError(f"unknown generated region {match['what']!r}")
        return f"{match[1]}\n{body}\n{match[4]}"

    return REGION.sub(one, page)


def stale_pages() -> list[Path]:
    """The committed pages that differ from what ``fill`` writes."""
    return [page for page in (CLI_PAGE, API_PAGE)
            if fill(page.read_text(encoding="utf-8")) != page.read_text(encoding="utf-8")]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    for page in (CLI_PAGE, API_PAGE):
        text = page.read_text(encoding="utf-8")
        if not REGION.search(text):
            print(f"{page}: no generated region", file=sys.stderr)
            return 1
        new = fill(text)
        if new != text:
            if check:
                print(f"{page.relative_to(DOCS.parent)} is stale: run make docs-reference")
            else:
                page.write_text(new, encoding="utf-8")
                print(f"wrote {page.relative_to(DOCS.parent)}")
    return 1 if check and stale_pages() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
