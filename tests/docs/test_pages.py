"""Every code block of the tutorial and the how-to guides runs, and prints what the page shows.

One test per page: its blocks run in order, Python blocks in one namespace and shell blocks with
``bash -euo pipefail``, all in one scratch directory (with ``examples/`` of the repository linked
into it), so a later block sees what an earlier one wrote. The fast suite runs each page with its
``test: fast`` replacements (tiny settings); the slow suite runs the pages that have replacements
as written. See tests/docs/blocks.py for the page conventions.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch


def _load_blocks():
    """tests/ is not a package (importlib mode): load the helper beside this file by path."""
    spec = importlib.util.spec_from_file_location("docs_blocks", Path(__file__).with_name("blocks.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_blocks"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


blocks = _load_blocks()
Block, read_blocks = blocks.Block, blocks.read_blocks
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted([*DOCS.glob("tutorial/*.md"), *DOCS.glob("how-to/*.md"), DOCS / "index.md",
                ROOT / "README.md",
                DOCS / "reference" / "errors.md"])
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _pictures(page: Path) -> list[str]:
    """The pictures the page shows that its blocks must write (docs/_generate/figures.py)."""
    spec = importlib.util.spec_from_file_location("docs_figures", DOCS / "_generate" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pictures(page)


def _page_id(page: Path) -> str:
    return str(page.relative_to(DOCS if page.is_relative_to(DOCS) else ROOT))


def _has_fast(page: Path) -> bool:
    return any(block.slow_output for block in read_blocks(page))


CASES = [pytest.param(page, True, id=f"{_page_id(page)}") for page in PAGES]
CASES += [pytest.param(page, False, id=f"{_page_id(page)}-as-written", marks=pytest.mark.slow)
          for page in PAGES if _has_fast(page)]


def _check_output(block: Block, got: str, *, fast: bool) -> None:
    if block.expected is None or (fast and block.slow_output):
        return
    if not CHECKER.check_output(block.expected, got, FLAGS):
        diff = CHECKER.output_difference(doctest.Example("", block.expected), got, FLAGS)
        raise AssertionError(f"{block.where()}: the output differs from the page's\n{diff}")


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TRANSFORMER_DATA", str(ROOT.parent / "shared" / "data"))
    env["MPLBACKEND"] = "Agg"
    env["COLUMNS"] = "100"
    env.pop("TRANSFORMER_API_KEY", None)
    return env


def _wait_for(url: str, process: subprocess.Popen, block: Block, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{block.where()}: the server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers (a 401 without the key is an answer)
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{block.where()}: {url} did not answer within {timeout:.0f} s")


def _run_shell(block: Block, code: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise AssertionError(f"{block.where()}: exit status {done.returncode}\n$ {code}\n"
                             f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")
    return done.stdout


def _run_python(block: Block, code: str, namespace: dict, page: Path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{page}:{block.line}", "exec"), namespace)  # noqa: S102
    return out.getvalue()


@pytest.mark.parametrize(("page", "fast"), CASES)
def test_page(page: Path, fast: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              request: pytest.FixtureRequest) -> None:
    page_blocks = read_blocks(page)
    env = _environment()
    if any(corpus in b.code and b.skip is None for b in page_blocks
           for corpus in ("multi30k", "nsmc", "goemotions")):
        # the shared corpora: a skip without them, a failure under CI (tests/conftest.py)
        env["TRANSFORMER_DATA"] = str(request.getfixturevalue("shared_data"))
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    for key in ("MPLBACKEND", "COLUMNS", "TRANSFORMER_DATA"):
        monkeypatch.setenv(key, env[key])
    namespace: dict = {"__name__": "__docs__"}
    servers: list[subprocess.Popen] = []
    # a page may switch gradients off or set threads, as a reader would: give them back after
    grad, threads = torch.is_grad_enabled(), torch.get_num_threads()
    try:
        for block in page_blocks:
            if block.skip is not None:
                continue
            code = block.code_for(fast=fast)
            if block.background is not None:
                server = subprocess.Popen(["bash", "-c", code], cwd=tmp_path,
                                          env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True)
                servers.append(server)
                _wait_for(block.background, server, block)
                continue
            if block.language == "python":
                got = _run_python(block, code, namespace, page)
            else:
                got = _run_shell(block, code, tmp_path, env)
            _check_output(block, got, fast=fast)
        for picture in _pictures(page):  # the page's pictures are its blocks' work (figures.py)
            assert (tmp_path / picture).is_file(), f"{_page_id(page)}: no block wrote {picture}"
    finally:
        torch.set_grad_enabled(grad)
        torch.set_num_threads(threads)
        plt.close("all")
        for server in servers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=20)


def test_every_page_has_a_block_that_runs() -> None:
    """A page whose blocks are all skipped (or that lost its fences) tests nothing."""
    for page in PAGES:
        if page.name == "index.md":
            continue
        assert any(b.skip is None for b in read_blocks(page)), f"{_page_id(page)}: no code block runs"
