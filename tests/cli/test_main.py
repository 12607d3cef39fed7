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
    assert set(info) == {"transformer", "torch", "machine"}
    import torch

    cpu = info["machine"]["cpu"]  # the machine as PyTorch sees it, not a guess
    assert cpu["capability"] == torch.backends.cpu.get_cpu_capability()
    assert cpu["quantized_engines"] == list(torch.backends.quantized.supported_engines)
    assert isinstance(cpu["native_bf16"], bool) and cpu["model"]


def test_no_verb_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_an_internal_failure_exits_1(tmp_path):
    """A bug (not bad input) is exit status 1, whatever it is."""
    code = ("import sys, transformer.cli.version as v\n"
            "def broken(args):\n    raise RuntimeError('a bug')\n"
            "v.run = broken\n"
            "from transformer.cli import main\nsys.exit(main(['version']))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1 and "a bug" in result.stderr


def test_a_write_error_exits_1_with_one_line(tmp_path, capsys, monkeypatch):
    from transformer.errors import WriteError

    def full(args):
        raise WriteError(f"{tmp_path / 'x'}: could not write (No space left on device)")

    import transformer.cli.version as version

    monkeypatch.setattr(version, "run", full)
    assert main(["version"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("transformer: error: ") and "\n" not in err and str(tmp_path) in err


def test_the_entry_imports_no_training():
    """Starting the command line loads no training module: a verb that needs one (train, and the
    end of its process in a distributed rank) imports it when it runs."""
    code = ("import sys, transformer.cli\n"
            "print([m for m in sys.modules if m.startswith('transformer.training')])\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
