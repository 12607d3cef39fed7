"""A command imports what it runs: ``import transformer.cli``, ``transformer --help``, every verb's
``--help``, ``version`` and ``translate`` on CTranslate2 (once the run is converted) leave PyTorch
unimported; the package's names still load on first use (``from transformer import
Transformer``), and each lazy package's table names what its ``TYPE_CHECKING`` block imports.

Each check runs in a fresh interpreter (this one has PyTorch loaded), which prints
``"torch" in sys.modules`` last."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import transformer
from helpers import save_translator

SRC = Path(transformer.__file__).resolve().parents[1]
LAZY_PACKAGES = ("transformer", "transformer.inference", "transformer.decoding",
                 "transformer.model_dir", "transformer.convert")


def fresh(code: str, *, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[str, bool]:
    """Run ``code`` in a fresh interpreter on this checkout; its stdout, and whether it ended
    with PyTorch imported."""
    script = f"import sys\n{code}\nprint('TORCH', 'torch' in sys.modules)\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=timeout, env={**os.environ, "PYTHONPATH": str(SRC), **(env or {})})
    assert result.returncode == 0, result.stderr[-2000:]
    out, _, flag = result.stdout.rstrip("\n").rpartition("\n")
    assert flag in ("TORCH True", "TORCH False"), result.stdout[-500:]
    return (out if out or not flag.startswith("TORCH") else ""), flag == "TORCH True"


def _run_cli(argv: list[str]) -> str:
    """Code that runs the command line on ``argv`` (its exit status kept, 0 for --help)."""
    return ("from transformer.cli import main\n"
            f"try:\n    code = main({argv!r})\nexcept SystemExit as e:\n    code = e.code\n"
            "assert code in (0, None), code\n")


def test_importing_the_command_line_leaves_torch_out():
    _, torch_loaded = fresh("import transformer, transformer.cli, transformer.inference, "
                            "transformer.model_dir, transformer.decoding, transformer.convert")
    assert not torch_loaded


def test_help_of_the_command_and_of_every_verb_leaves_torch_out():
    from transformer.cli import VERBS

    commands = [["--help"], *([verb.name, "--help"] for verb in VERBS),
                ["classify", "train", "--help"], ["export", "ctranslate2", "--help"],
                ["config", "show", "--help"]]
    code = "import contextlib, io\n" + "".join(
        "with contextlib.redirect_stdout(io.StringIO()):\n    "
        + _run_cli(argv).replace("\n", "\n    ").rstrip() + "\n" for argv in commands)
    _, torch_loaded = fresh(code)
    assert not torch_loaded


def test_the_package_names_still_load_on_first_use():
    out, torch_loaded = fresh("from transformer import ModelConfig, Transformer, TransformerClassifier\n"
                              "print(Transformer.__module__, sorted(dir(__import__('transformer')))[:3])")
    assert torch_loaded and out.startswith("transformer.model.transformer")
    for package in LAZY_PACKAGES:
        module = importlib.import_module(package)
        assert set(module.__all__) <= set(dir(module))
        for name in module.__all__:
            assert getattr(module, name) is not None
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            module.nope  # noqa: B018


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_each_lazy_table_is_what_its_type_checking_block_imports(package):
    """The names a lazy package serves are those its TYPE_CHECKING block imports, from the same
    modules, and its ``__all__`` (the layout test reads imports from that block)."""
    path = Path(importlib.import_module(package).__file__)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", "") == "TYPE_CHECKING")
    imported = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    call = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "lazy_names")
    table = {name: module for module, names in ast.literal_eval(call.args[1]).items() for name in names}
    assert table == imported
    assert set(table) == set(importlib.import_module(package).__all__)


def test_version_reads_the_machine_without_torch_once_cached(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    code = _run_cli(["version", "--json"])
    first, first_torch = fresh(code, env=env)
    second, second_torch = fresh(code, env=env)
    assert first_torch and not second_torch  # the first asks PyTorch and caches its answer
    assert json.loads(second) == json.loads(first)
    with_torch, _ = fresh("import torch\n" + code, env=env)  # PyTorch asked directly
    assert json.loads(with_torch) == json.loads(first)


@pytest.fixture(scope="module")
def converted_run(tmp_path_factory, tokenizer):
    """A tiny run converted to CTranslate2 (fp32) by a first use, as the command makes it."""
    pytest.importorskip("ctranslate2")
    from transformer.inference.loader import load_translator

    run = save_translator(tmp_path_factory.mktemp("lazy") / "run", tokenizer, d_model=32, d_ff=64,
                          num_heads=4)
    load_translator(run, engine="ctranslate2", precision="fp32")
    return run


def test_translate_on_ctranslate2_leaves_torch_out_and_answers_the_same(converted_run, tmp_path):
    lines = ["seven hundred", "forty two", "three thousand and one"]
    argv = ["translate", "--model", str(converted_run), "--engine", "ctranslate2", "--precision",
            "fp32", "--threads", "1", "--beam", "2", "--json", *lines]
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    without, torch_loaded = fresh(_run_cli(argv), env=env)
    assert not torch_loaded
    # nor numpy, which CTranslate2 does not import either (a tenth of a second at each start)
    numpy_out, _ = fresh(_run_cli(argv) + "print('NUMPY', 'numpy' in sys.modules)", env=env)
    assert numpy_out.splitlines()[-1] == "NUMPY False"
    with_torch, _ = fresh("import torch\n" + _run_cli(argv), env=env)
    assert without == with_torch and [json.loads(line) for line in without.splitlines()]
