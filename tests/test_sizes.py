"""Files and functions small enough to read: no file in src/ or benchmarks/ over 400 lines, the
command line's entry under 100, no function in src/ over 80 (STYLE.md: one idea per file)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 400
MAX_ENTRY_LINES = 100
MAX_FUNCTION_LINES = 80


def python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


def test_no_file_over_400_lines():
    files = python_files("src", "benchmarks")
    assert len(files) > 100
    long = {str(p.relative_to(REPO)): n for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_the_command_line_entry_is_under_100_lines():
    entry = REPO / "src" / "transformer" / "cli" / "__init__.py"
    assert len(entry.read_text(encoding="utf-8").splitlines()) < MAX_ENTRY_LINES


def long_functions(path: Path) -> dict[str, int]:
    """``file:function`` -> lines, for every function (methods and nested ones too) over 80."""
    out = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                out[f"{path.relative_to(REPO)}:{node.name}"] = lines
    return out


def test_no_function_in_src_over_80_lines():
    found = {}
    for path in python_files("src"):
        found.update(long_functions(path))
    assert found == {}


def test_the_function_check_can_fail(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    path = REPO / "src" / "_probe_long_function.py"
    try:
        path.write_text(f"def long():\n{body}\n", encoding="utf-8")
        assert long_functions(path) == {"src/_probe_long_function.py:long": MAX_FUNCTION_LINES + 1}
    finally:
        path.unlink()
