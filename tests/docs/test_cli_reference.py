"""The generated command-line reference lists every verb and every flag of the parsers, and every
``transformer ...`` command written in the docs uses only flags its verb has."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

from transformer.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


hook = _load("docs_cli_reference", DOCS / "_hooks" / "cli_reference.py")
blocks = _load("docs_blocks", Path(__file__).with_name("blocks.py"))


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_the_reference_has_every_verb_and_flag():
    page = hook.render()
    verbs = list(hook.walk(build_parser()))
    assert len(verbs) >= 15  # the walk found the sub-commands (classify train, export ...)
    for path, _, parser in verbs:
        name = " ".join(path)
        section = page.split(f"## `transformer {name}`", 1)
        assert len(section) == 2, f"no section for transformer {name}"
        body = section[1].split("\n## ", 1)[0]
        missing = sorted(o for o in _options(parser) if o not in body)
        assert not missing, f"transformer {name}: {missing} missing from its section"


def test_the_hook_fills_only_the_cli_page():
    class Page:
        class file:
            src_uri = "reference/cli.md"

    filled = hook.on_page_markdown(f"intro\n{hook.MARKER}\n", Page)
    assert hook.MARKER not in filled and "## `transformer train`" in filled
    Page.file.src_uri = "index.md"
    assert hook.on_page_markdown(f"x {hook.MARKER}", Page) == f"x {hook.MARKER}"
    Page.file.src_uri = "reference/cli.md"
    with pytest.raises(ValueError, match="marker"):
        hook.on_page_markdown("the marker was deleted", Page)


def _commands(text: str) -> list[str]:
    """The `transformer ...` command lines of a shell block, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        for part in re.split(r"\|\||&&|\||;", line.split(" #")[0]):
            words = part.strip().split()
            while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value prefixes
                words = words[1:]
            if words[:1] == ["transformer"] or words[:3] == ["-m", "transformer"]:
                found.append(" ".join(words))
            elif "-m" in words and words[words.index("-m") + 1:][:1] == ["transformer"]:
                found.append(" ".join(words[words.index("-m") + 1:]))
    return found


def _verb(parser: argparse.ArgumentParser, words: list[str]) -> tuple[argparse.ArgumentParser, str]:
    """The deepest sub-parser named by the leading words."""
    name = "transformer"
    for word in words:
        subs = {n: p for n, _, p in hook._subcommands(parser)}
        if word not in subs:
            break
        parser, name = subs[word], f"{name} {word}"
    return parser, name


PAGES = sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_every_flag_written_in_the_docs_exists(page):
    top = build_parser()
    checked = 0
    for block in blocks.read_blocks(page):
        if block.language != "bash":
            continue
        for command in _commands(block.code):
            words = shlex.split(command.replace("$", ""))[1:]
            parser, name = _verb(top, words)
            known = _options(parser)
            if name == "transformer config show":  # its FLAGS are the training verb's it shows
                known |= _options(_verb(top, ["train"])[0])
                known |= _options(_verb(top, ["classify", "train"])[0])
            for word in words:
                flag = word.split("=", 1)[0]
                if flag.startswith("--") or re.fullmatch(r"-[a-zA-Z]", flag):
                    assert flag in known, f"{block.where()}: {name} has no flag {flag}"
            checked += 1
    if page.parent.name in ("how-to",) and page.name != "index.md":
        assert checked, f"{page.name}: no transformer command found to check"


def test_sphinx_roles_of_docstrings_become_plain_code():
    html = ("with :meth:<code>decode</code>, a :class:<code>~transformer.model_dir.LoadedModel</code>"
            " and :func:<code>transformer.decoding.greedy_decode</code>")
    assert hook.plain_roles(html) == ("with <code>decode</code>, a <code>LoadedModel</code> and "
                                      "<code>transformer.decoding.greedy_decode</code>")
