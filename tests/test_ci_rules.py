"""The suite's rules for CI (tests/conftest.py): a missing dependency of the test extra fails
instead of skipping under ``CI=true``, and every run says how many tests it skipped and how many
of those the suite declares for this machine (what .ci/run compares)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def run_without_fastapi(tmp_path: Path, *, ci: bool) -> subprocess.CompletedProcess:
    """pytest on the serving CLI tests in a process where ``import fastapi`` fails (as if the test
    extra lost it)."""
    (tmp_path / "no_fastapi.py").write_text("import sys\n\nsys.modules['fastapi'] = None\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    if ci:
        env["CI"] = "true"
    # the tests folder with all but serving/ ignored: serving/conftest.py is then imported while
    # collecting (as in a whole run), not at start-up as a command-line argument's conftest is
    others = [f"--ignore={p}" for p in sorted((REPO / "tests").iterdir())
              if p.name not in ("serving", "conftest.py")]
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no_fastapi", "-k", "test_bad_flags", *others, "tests"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def conftest():
    """tests/conftest.py as a module (the import mode is importlib: it is not on sys.path)."""
    spec = importlib.util.spec_from_file_location("suite_conftest", REPO / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_missing_test_dependency_fails_under_ci(tmp_path):
    done = run_without_fastapi(tmp_path, ci=True)
    assert done.returncode != 0, done.stdout[-2000:]
    line = "CI=true: a dependency of the test extra is missing, so this fails instead of skipping: " \
        "could not import 'fastapi'"
    assert line in done.stdout and "1 error" in done.stdout.splitlines()[-1]
    assert "skips: 0 skipped" in done.stdout


def test_a_missing_test_dependency_skips_elsewhere_and_is_not_declared(tmp_path):
    done = run_without_fastapi(tmp_path, ci=False)
    assert done.returncode == 5, done.stdout[-2000:]  # the folder skipped: no test ran
    assert "skips: 1 skipped, 0 declared skippable on this machine" in done.stdout
    assert "skips: not declared for this machine: could not import 'fastapi'" in done.stdout


def test_the_declared_skips_hold_only_where_the_machine_lacks_the_thing():
    declared_skippable = conftest().declared_skippable
    from transformer.decoding.packing import int8_engine, packing_available

    assert declared_skippable("this machine has CUDA") == torch.cuda.is_available()
    assert declared_skippable("this PyTorch build has no oneDNN") == (not packing_available())
    assert declared_skippable("no quantized engine (x86, fbgemm or qnnpack) for this CPU") == \
        (int8_engine() is None)
    for reason in ("could not import 'fastapi': No module named 'fastapi'",
                   "shared data folder not found: /nowhere (set TRANSFORMER_DATA)",
                   "the browser test needs chromium", "anything else"):
        assert not declared_skippable(reason)


def count_skips(tmp_path, lines, runs=2):
    log = tmp_path / "log"
    log.write_text("\n".join(["....", *lines, "12 passed in 1.0s"]) + "\n")
    return subprocess.run([str(REPO / ".ci" / "count-skips"), str(log), str(runs)],
                          capture_output=True, text=True)


def test_ci_counts_the_skips_of_both_runs(tmp_path):
    ok = count_skips(tmp_path, ["skips: 2 skipped, 2 declared skippable on this machine",
                                "skips: 1 skipped, 1 declared skippable on this machine"])
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().splitlines()[-1] == \
        "CI: 3 tests skipped in 2 pytest runs; 3 declared skippable on this machine"
    over = count_skips(tmp_path, ["skips: 0 skipped, 0 declared skippable on this machine",
                                  "skips: 3 skipped, 1 declared skippable on this machine",
                                  "skips: not declared for this machine: could not import 'x'"])
    assert over.returncode == 1
    assert "2 skipped tests are not declared" in over.stderr and "could not import 'x'" in over.stderr
    one_run = count_skips(tmp_path, ["skips: 0 skipped, 0 declared skippable on this machine"])
    assert one_run.returncode == 1 and "expected 2 pytest runs" in one_run.stderr


def test_ci_expects_as_many_runs_as_make_test_has():
    """.ci/run's count of pytest runs is `make test`'s: its own and test-avx2's."""
    makefile = (REPO / "Makefile").read_text()
    recipes = [makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0] for target in ("test", "test-avx2")]
    runs = sum(recipe.count("-m pytest") for recipe in recipes)
    assert "$(MAKE) --no-print-directory test-avx2" in recipes[0]
    assert f'count-skips" "$log" {runs}' in (REPO / ".ci" / "run").read_text()
