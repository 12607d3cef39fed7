"""The command line's contract: entry points, exit statuses, one JSON object with --json."""

from __future__ import annotations

import json
import subprocess
import sys

from transformer.cli import main


def test_python_dash_m_and_json(capsys):
    result = subprocess.run(
        [sys.executable, "-m", "transformer", "version", "--json"],
        capture_output=True, text=True, check=True,
    )
    info = json.loads(result.stdout)
    assert set(info) == {"transformer", "torch"}


def test_no_verb_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err
