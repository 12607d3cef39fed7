"""The code blocks of a documentation page, and how the tests run them.

A page is read top to bottom. Each fenced block whose language is ``python``, ``bash`` or
``console``-free ``sh`` is code; a ``text`` block that follows a code block with nothing but blank
lines between is that block's expected output (compared like doctest with ELLIPSIS and
NORMALIZE_WHITESPACE: ``...`` matches anything). Any other block (a directory listing, JSON shown
as a format) is prose.

An HTML comment right above a code block (invisible on the site) says how to run it:

- ``<!-- test: skip REASON -->``: not run; the reason is required and shown in the test's report.
- ``<!-- test: fast 'OLD' 'NEW' -->``: the fast suite runs the block with OLD replaced by NEW
  (tiny settings: fewer updates); its output is then not compared. The slow suite runs the page
  as written. Several pairs may follow one another in one comment; with none (``test: fast``)
  the block runs as written in both suites and its output is compared in the slow suite only
  (it depends on a model that the fast suite trains too briefly).
- ``<!-- test: shorten 'OLD' 'NEW' -->``: the replacement is made in both suites, for runs too
  long for any test suite (the one-hour recipe); what it prints must not depend on it, since its
  output is compared as usual.
- ``<!-- test: background URL -->``: a shell block that serves until stopped: started in the
  background, URL polled until it answers, stopped when the page is done.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

CODE_LANGUAGES = {"python": "python", "bash": "bash", "sh": "bash"}
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
DIRECTIVE = re.compile(r"<!--\s*test:\s*(?P<kind>\w+)\s*(?P<rest>.*?)\s*-->\s*\Z", re.S)


@dataclass
class Block:
    """One runnable block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    language: str  # "python" or "bash"
    code: str
    expected: str | None = None  # the text block after it, if any
    skip: str | None = None  # the reason it is not run
    fast: list[tuple[str, str]] = field(default_factory=list)  # (old, new) for the fast suite
    shorten: list[tuple[str, str]] = field(default_factory=list)  # (old, new) for both suites
    background: str | None = None  # URL to wait for
    slow_output: bool = False  # the output is compared in the slow suite only

    def where(self) -> str:
        return f"{self.page.name}:{self.line}"

    def code_for(self, *, fast: bool) -> str:
        code = self.code
        for old, new in [*(self.fast if fast else []), *self.shorten]:
            if old not in code:
                raise ValueError(f"{self.where()}: the replacement {old!r} is not in the block")
            code = code.replace(old, new)
        return code


def _directive(before: str, where: str) -> tuple[str, str] | None:
    match = DIRECTIVE.search(before.rstrip() + "\n" if before.strip() else "")
    if match is None:
        return None
    return match["kind"], match["rest"]


def read_blocks(page: Path) -> list[Block]:
    """Every runnable block of ``page`` with its expected output and directive."""
    text = page.read_text(encoding="utf-8")
    blocks: list[Block] = []
    last_end = 0
    previous: Block | None = None
    for match in FENCE.finditer(text):
        between = text[last_end:match.start()]
        line = text.count("\n", 0, match.start()) + 1
        lang = match["lang"]
        last_end = match.end()
        if lang == "text" and previous is not None and between.strip() == "":
            previous.expected = match["body"]
            previous = None
            continue
        previous = None
        if lang not in CODE_LANGUAGES:
            continue
        block = Block(page=page, line=line, language=CODE_LANGUAGES[lang], code=match["body"])
        directive = _directive(between, f"{page}:{line}")
        if directive is not None:
            kind, rest = directive
            if kind == "skip":
                if not rest:
                    raise ValueError(f"{page}:{line}: a skipped block needs its reason")
                block.skip = rest
            elif kind in ("fast", "shorten"):
                words = shlex.split(rest)
                if len(words) % 2 or (kind == "shorten" and not words):
                    raise ValueError(f"{page}:{line}: test: {kind} takes pairs 'OLD' 'NEW'")
                pairs = list(zip(words[::2], words[1::2], strict=True))
                if kind == "fast":
                    block.slow_output, block.fast = True, pairs
                else:
                    block.shorten = pairs
            elif kind == "background":
                block.background = rest or None
            else:
                raise ValueError(f"{page}:{line}: unknown test directive {kind!r}")
        blocks.append(block)
        previous = block
    return blocks
