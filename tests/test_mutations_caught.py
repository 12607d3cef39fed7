"""The mutations issue 36 found surviving, each applied alone to a copy of the source: the tests
named beside it must fail (and pass on the unmutated copy). The working tree is never touched:
``src/``, ``tests/`` and ``pyproject.toml`` are copied to a temporary folder and the tests run there
in a subprocess with the copy first on ``PYTHONPATH``. A mutation whose line no longer exists fails
here: update the table with the code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# (name, file under src/transformer, the line(s) as they are, the mutant, the tests that must fail)
MUTATIONS = [
    ("api key guards only /v1/translate", "serving/guard.py",
     'PROTECTED_PREFIX = "/v1/"', 'PROTECTED_PREFIX = "/v1/translate"',
     ["tests/serving/test_guard.py", "tests/serving/test_bad_input.py"]),
    ("classify batch gives every request the first one's rows", "serving/models.py",
     "            start += len(texts_of_one)\n", "            pass\n",
     ["tests/serving/test_batching.py"]),
    ("serve ignores $TRANSFORMER_API_KEY", "cli/serve.py",
     "api_key=args.api_key or os.environ.get(API_KEY_ENV) or None", "api_key=args.api_key or None",
     ["tests/serving/test_cli.py"]),
    ("int8: one scale for the whole matrix", "decoding/packing.py",
     "scale = (weight.abs().amax(dim=1) / 127.0)",
     "scale = (weight.abs().amax().expand(weight.size(0)) / 127.0)",
     ["tests/decoding/test_int8.py"]),
    ("the body limit counts each chunk alone", "serving/guard.py",
     "size += len(chunk)", "size = len(chunk)", ["tests/serving/test_guard.py"]),
    ("resume auto starts over a run of other flags", "training/run_lifecycle.py",
     "        check_same_run(recipe.kind, cfg, record)\n", "        pass\n",
     ["tests/training/test_auto_resume.py"]),
    ("the schedule stands still over a skipped update", "training/trainer.py",
     "                self._step_schedule(n)\n",
     "                if not st.bad_in_a_row:\n                    self._step_schedule(n)\n",
     ["tests/training/test_non_finite.py"]),
    ("preemption restores only SIGTERM's handler", "training/preemption.py",
     "        for signum, handler in self._previous.items():\n            signal.signal(signum, handler)\n",
     "        for signum, handler in self._previous.items():\n"
     "            if signum == signal.SIGTERM:\n                signal.signal(signum, handler)\n",
     ["tests/training/test_preemption.py", "-k", "restored"]),
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A copy of the working tree's source, tests and pytest configuration."""
    root = tmp_path_factory.mktemp("pristine")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache")
    for name in ("src", "tests"):
        shutil.copytree(REPO / name, root / name, ignore=ignore)
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def run_tests(root: Path, tests: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    env.setdefault("TRANSFORMER_DATA", str(REPO.parent / "shared" / "data"))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           "-m", "not slow", *tests], cwd=root, env=env, capture_output=True,
                          text=True, timeout=900)


def mutated(pristine: Path, target: Path, file: str, old: str, new: str) -> Path:
    shutil.copytree(pristine, target)
    path = target / "src" / "transformer" / file
    text = path.read_text()
    assert text.count(old) == 1, f"{file}: the line to mutate is not there once: {old!r}"
    path.write_text(text.replace(old, new))
    return target


def test_the_copy_runs_the_copy(pristine, tmp_path):
    """The subprocess imports the copied package, not the working tree's."""
    env = {**os.environ, "PYTHONPATH": str(pristine / "src")}
    out = subprocess.run([sys.executable, "-c", "import transformer; print(transformer.__file__)"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
    assert Path(out.strip()).is_relative_to(pristine)


@pytest.mark.parametrize("tests", sorted({tuple(m[4]) for m in MUTATIONS}), ids=lambda t: t[0])
def test_the_tests_pass_unmutated(pristine, tests):
    done = run_tests(pristine, list(tests))
    assert done.returncode == 0, done.stdout[-3000:]
    assert " skipped" not in done.stdout.splitlines()[-1], done.stdout[-500:]


@pytest.mark.parametrize(("name", "file", "old", "new", "tests"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_the_mutation_is_caught(pristine, tmp_path, name, file, old, new, tests):
    root = mutated(pristine, tmp_path / "mutant", file, old, new)
    done = run_tests(root, tests)
    assert done.returncode == 1, f"{name}: not caught (exit {done.returncode})\n{done.stdout[-2000:]}"
    assert " failed" in done.stdout.splitlines()[-1]
