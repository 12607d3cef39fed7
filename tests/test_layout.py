"""The package's imports point one way: no two modules import each other (lazy imports inside
functions included), and configuration imports nothing above it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its text (packages' __init__ left
    out: they re-export their children by design)."""
    modules = {".".join(p.relative_to(SRC).with_suffix("").parts): p
               for p in SRC.rglob("*.py") if p.name != "__init__.py"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_two_modules_import_each_other():
    graph = import_graph()
    assert len(graph) > 50  # the walk found the package
    mutual = sorted((a, b) for a, deps in graph.items() for b in deps
                    if a < b and a in graph.get(b, set()))
    assert mutual == []


def test_configuration_imports_nothing_above_it():
    allowed = ("transformer.config.", "transformer.errors")
    graph = import_graph()
    upward = sorted((a, b) for a, deps in graph.items() if a.startswith("transformer.config.")
                    for b in deps if not b.startswith(allowed))
    assert upward == []


def test_the_command_line_resolves_devices_without_training():
    assert not any(m.startswith("transformer.training") for m in import_graph()["transformer.cli.common"])
