"""The package's imports point one way: down the floors of the map in docs/explanation/design.md
(read from the page, so the map cannot drift from the code), no two modules import each other
(lazy imports inside functions included), and no circle of packages."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
DESIGN = REPO / "docs" / "explanation" / "design.md"


def imports_of(path: Path) -> set[str]:
    """Every ``transformer...`` name a file imports, anywhere in its text."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "transformer" or name.startswith("transformer.")}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (packages' __init__ left out: they re-export
    their children by design)."""
    modules = {".".join(p.relative_to(SRC).with_suffix("").parts): p
               for p in SRC.rglob("*.py") if p.name != "__init__.py"}
    return {name: {m for m in imports_of(path) if m in modules and m != name}
            for name, path in modules.items()}


def package_of(name: str) -> str | None:
    """``transformer.inference.loader`` -> ``inference``; the package face and ``__main__`` -> None."""
    parts = name.split(".")
    if len(parts) < 2 or parts[1] in ("__main__",):
        return None
    return parts[1]


def package_graph() -> dict[str, set[str]]:
    """Package (or top-level module) -> the packages it imports, from every file, __init__ too."""
    known = {p.stem for p in (SRC / "transformer").iterdir() if p.suffix == ".py" or p.is_dir()}
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        source = package_of(name)
        if source is None:
            continue
        targets = {package_of(m) for m in imports_of(path)} - {None, source}
        graph.setdefault(source, set()).update(t for t in targets if t in known)
    return graph


def floors() -> dict[str, int]:
    """Package -> floor, from the table under the ``floors`` marker of the design page."""
    text = DESIGN.read_text(encoding="utf-8")
    table = text.split("<!-- floors:", 1)[1].split("\n\n", 1)[0]
    out: dict[str, int] = {}
    for line in table.splitlines():
        row = re.match(r"\|\s*(\d+)\s*\|([^|]+)\|", line)
        if row:
            for package in re.findall(r"`(\w+)`", row.group(2)):
                out[package] = int(row.group(1))
    return out


def test_no_two_modules_import_each_other():
    graph = import_graph()
    assert len(graph) > 50  # the walk found the package
    mutual = sorted((a, b) for a, deps in graph.items() for b in deps
                    if a < b and a in graph.get(b, set()))
    assert mutual == []


def test_every_package_is_on_the_map():
    assert set(package_graph()) <= set(floors()), "a package missing from design.md's floors"
    assert len(floors()) >= 15


def test_every_import_runs_down_the_floors():
    """A package imports only packages on lower floors: no circle of packages, and nothing that
    runs back up (decoding never imports evaluation, inference, serving or training)."""
    level = floors()
    upward = sorted(f"{a} (floor {level[a]}) imports {b} (floor {level[b]})"
                    for a, deps in package_graph().items() for b in deps if level[b] >= level[a])
    assert upward == []


def test_the_map_itself_runs_down():
    """The check above can fail: packages that the map puts on one floor do not import each
    other, and decoding sits below every package that uses a model directory."""
    level = floors()
    assert level["decoding"] < level["model_dir"] < level["inference"] < level["serving"]
    assert level["config"] < level["model"] < level["data"] < level["training"] < level["cli"]


def test_no_circle_of_packages():
    graph = package_graph()
    seen: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                return [*path, node, nxt]
            if nxt not in seen and (circle := visit(nxt, [*path, node])):
                return circle
        seen[node] = 2
        return None

    circles = [c for start in sorted(graph) if start not in seen and (c := visit(start, []))]
    assert circles == []


def test_the_command_line_resolves_devices_without_training():
    assert not any(m.startswith("transformer.training") for m in import_graph()["transformer.cli.common"])
