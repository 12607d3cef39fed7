"""A benchmark that needs a trained model, run on a fresh clone without one, says which command
makes it (exit 2) instead of failing on a missing path; no benchmark defaults to a machine's path."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv, command", [
    (["serve.py", "--model", "{missing}"], "transformer train --preset multi30k-cpu"),
    (["ctranslate2_bleu.py", "--model", "{missing}"], "transformer train --preset multi30k-cpu"),
    (["quality.py", "--skip-train", "--runs", "{missing}"], "benchmarks/quality.py --directions"),
    (["decoding.py", "--suite", "e2e", "--model", "{missing}"], "transformer train --preset multi30k-cpu"),
])
def test_a_missing_model_gets_the_command_that_makes_it(tmp_path, argv, command):
    missing = str(tmp_path / "no-model")
    argv = [a.format(missing=missing) for a in argv]
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / argv[0]), *argv[1:]],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert "make one first" in done.stderr and command in done.stderr
    assert "Traceback" not in done.stderr


def test_no_benchmark_defaults_to_a_path_of_one_machine():
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        text = script.read_text(encoding="utf-8")
        assert not re.search(r"default=[^,)]*['\"]/(work|home|root|Users)/", text), script.name
