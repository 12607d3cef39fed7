"""The pictures of a documentation page, made by the page's own code blocks.

    python docs/_generate/figures.py docs/tutorial/07-training.md [more pages]

runs the page's blocks as written (as the slow docs test does: ``test: shorten`` replacements
applied, skipped blocks left out) in a scratch directory with ``examples/`` linked into it, then
copies into ``docs/`` every picture the page shows (``![...](../NAME.png)``) that its blocks wrote.
tests/docs/test_pages.py checks, every time it runs a page, that its blocks still write them.
Run it from the repository's root with the package importable (``PYTHONPATH=src``) and commit the
pictures it copies.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.(?:png|svg))\)")
# pictures the pages show that no page's blocks make, and what makes each
MADE_ELSEWHERE = {
    "attention-cross.png": "transformer attention on the demo's model (transformer demo)",
    "attention-cross-alignment.png": "transformer attention on the demo's model (transformer demo)",
    "serve-page.png": "make screenshot (the browser test)",
    "multi30k-bleu-minutes.png": "benchmarks/quality.py (transformer plot curves of its two runs)",
    "tensorboard-watch.png": "a browser's screenshot of TensorBoard on how-to/watch.md's run",
    "translate-html.png": "docs/_generate/html_picture.py (Chromium's screenshot, a Multi30k run)",
}


def _blocks_module():
    spec = importlib.util.spec_from_file_location("docs_blocks", ROOT / "tests" / "docs" / "blocks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_blocks"] = module
    spec.loader.exec_module(module)
    return module


def pictures(page: Path) -> list[str]:
    """The file names of the pictures ``page`` shows that its blocks must write: all of them but
    those listed in ``MADE_ELSEWHERE``."""
    names = [Path(target).name for target in IMAGE.findall(page.read_text(encoding="utf-8"))]
    return [name for name in dict.fromkeys(names) if name not in MADE_ELSEWHERE]


def run_page(page: Path, where: Path) -> None:
    """Run ``page``'s blocks as written in the directory ``where``."""
    namespace: dict = {"__name__": "__docs__"}
    env = {**os.environ, "MPLBACKEND": "Agg",  # `transformer` of this Python's environment first
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    old = Path.cwd()
    os.chdir(where)
    try:
        for block in _blocks_module().read_blocks(page):
            if block.skip is not None or block.background is not None:
                continue
            code = block.code_for(fast=False)
            if block.language == "python":
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(code, f"{page}:{block.line}", "exec"), namespace)  # noqa: S102
            else:
                subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=where, env=env,
                               check=True, stdout=subprocess.DEVNULL)
    finally:
        os.chdir(old)


def main(pages: list[str]) -> int:
    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in pages:
        page = Path(name).resolve()
        with tempfile.TemporaryDirectory() as scratch:
            where = Path(scratch)
            (where / "examples").symlink_to(ROOT / "examples")
            run_page(page, where)
            for picture in pictures(page):
                shutil.copyfile(where / picture, DOCS / picture)
                print(f"wrote docs/{picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
