"""The reference pages made from the code (docs/_generate/reference.py) are committed up to date and
readable as plain Markdown; the command-line reference lists every verb and every flag of the
parsers; every ``transformer ...`` command written in the docs uses only flags its verb has."""

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


hook = _load("docs_reference", DOCS / "_generate" / "reference.py")
blocks = _load("docs_blocks", Path(__file__).with_name("blocks.py"))


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_the_reference_has_every_verb_and_flag():
    page = hook.render_cli()
    verbs = list(hook.walk(build_parser()))
    assert len(verbs) >= 15  # the walk found the sub-commands (classify train, export ...)
    for path, _, parser in verbs:
        name = " ".join(path)
        section = page.split(f"## `transformer {name}`\n", 1)
        assert len(section) == 2, f"no section for transformer {name}"
        body = section[1].split("\n## ", 1)[0]
        missing = sorted(o for o in _options(parser) - {"-h", "--help"} if o not in body)
        assert not missing, f"transformer {name}: {missing} missing from its section"


def test_the_committed_reference_pages_are_what_the_code_generates():
    """`make docs-reference` writes them; a flag, verb or docstring changed since fails here."""
    stale = [str(p.relative_to(ROOT)) for p in hook.stale_pages()]
    assert not stale, f"stale: {stale}; run `make docs-reference` and commit the pages"


def test_the_reference_pages_read_on_github():
    """No marker that only a build step expands (mkdocstrings' `:::`), no page left empty."""
    for page in sorted((DOCS / "reference").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"^:::", text, re.M), f"{page.name}: a `:::` marker"
        prose = re.sub(r"<!--.*?-->", "", text, flags=re.S)
        assert len(prose.split()) > 40, f"{page.name} is nearly empty"
    api = (DOCS / "reference" / "python-api.md").read_text(encoding="utf-8")
    for name in ("load_translator", "translate_lines", "greedy_decode", "ModelConfig"):
        assert f"### `{name}`" in api, f"the Python API page lacks {name}"


def test_a_stale_region_is_found_and_an_unknown_one_refused():
    page = "intro\n<!-- generated: api transformer.errors.InputError -->\nold text\n<!-- /generated -->\n"
    filled = hook.fill(page)
    assert "old text" not in filled and "### `InputError`" in filled and hook.fill(filled) == filled
    with pytest.raises(ValueError, match="unknown generated region"):
        hook.fill("<!-- generated: nonsense -->\n<!-- /generated -->")


def test_a_long_signature_gets_one_parameter_a_line():
    def f(alpha: int, beta: str = "b", *, gamma: float = 1.0, delta: list[int] | None = None,
          epsilon: bool = False, zeta: int = 0) -> dict[str, int]:
        """Nothing."""

    text = hook.signature("f", f)
    assert text.splitlines()[:3] == ["f(", "    alpha: int,", "    beta: str = 'b',"]
    assert "    *,\n    gamma: float = 1.0," in text and text.endswith(") -> dict[str, int]")
    assert hook.signature("g", lambda x, /, y: None) == "g(x, /, y)"
    assert hook._annotation("'Path'") == "Path"  # a quoted annotation as the source means it


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


PAGES = sorted(p for p in DOCS.rglob("*.md") if "_generate" not in p.parts)


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
            if name == "transformer config show":  # its flags are the training verb's it shows
                shown = ["classify", "train"] if "classification" in words else ["train"]
                known |= _options(_verb(top, shown)[0])
            for word in words:
                flag = word.split("=", 1)[0]
                if flag.startswith("--") or re.fullmatch(r"-[a-zA-Z]", flag):
                    assert flag in known, f"{block.where()}: {name} has no flag {flag}"
            checked += 1
    if page.parent.name in ("how-to",) and page.name != "index.md":
        assert checked, f"{page.name}: no transformer command found to check"


def test_sphinx_roles_of_docstrings_become_plain_code():
    text = ("with :meth:`decode`, a :class:`~transformer.model_dir.LoadedModel`"
            " and :func:`transformer.decoding.greedy_decode` on ``src`` (B, S)")
    assert hook.plain_roles(text) == ("with `decode`, a `LoadedModel` and "
                                      "`transformer.decoding.greedy_decode` on `src` (B, S)")


IMPORT = re.compile(r"^\s*from (transformer(?:\.[\w.]+)?) import \(?([\w, ]+)\)?", re.M)


def test_the_readme_and_the_how_to_guides_use_only_the_public_python_api():
    """The Python API page calls everything it does not list internal: the pages for users import
    only what it lists (the tutorial opens internal modules on purpose, to show how a piece works)."""
    api = (DOCS / "reference" / "python-api.md").read_text(encoding="utf-8")
    public = set(re.findall(r"^### `(\w+)`", api, re.M))
    public |= {name.strip() for _, names in IMPORT.findall(api.split("## ", 1)[0])
               for name in names.split(",")}
    pages = [ROOT / "README.md", *sorted((DOCS / "how-to").glob("*.md"))]
    for page in pages:
        for block in blocks.read_blocks(page):
            if block.language != "python":
                continue
            for module, names in IMPORT.findall(block.code):
                for name in (n.strip() for n in names.split(",")):
                    assert name in public, f"{block.where()}: {module}.{name} is not in the API page"
