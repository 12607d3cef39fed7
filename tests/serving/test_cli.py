"""``transformer serve``'s bad flags: one line on stderr, exit status 2, nothing served."""

from __future__ import annotations

import pytest

from transformer.cli import main
from transformer.serving.models import parse_model_specs


def test_model_specs_are_named():
    assert parse_model_specs(["runs/en-de/", "fr=runs/x"]) == {"en-de": "runs/en-de/", "fr": "runs/x"}


@pytest.mark.parametrize(("argv", "words"), [
    (["--model", "MISSING"], ["MISSING"]),
    (["--model", "a=DIR", "--model", "a=DIR2"], ["'a'", "twice"]),
    (["--model", "=DIR"], ["[NAME=]RUN_DIR"]),
    (["--model", "DIR", "--port", "70000"], ["--port", "70000"]),
    (["--model", "DIR", "--batch-tokens", "0"], ["--batch-tokens"]),
])
def test_bad_flags(capsys, tmp_path, argv, words):
    argv = [a.replace("DIR", str(tmp_path / "none")) if "DIR" in a else a for a in argv]
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transformer: error: ") and "\n" not in err and "Traceback" not in err
    for word in words:
        assert word in err, err
