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


def test_the_executable_freezes_what_the_imports_left_out_of_the_collector():
    """``python -m transformer`` (and the console script) freezes the objects the imports made,
    PyTorch's among them when a verb imports it (``memory`` does), so that no full collection,
    the one at exit included, walks them."""
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count(), gc.isenabled()))\n"
            "sys.argv = ['transformer', 'memory', '--preset', 'tiny']\n"
            "import runpy\nrunpy.run_module('transformer', run_name='__main__')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    frozen, count, collecting = result.stdout.split()[-3:]
    assert frozen == "frozen" and int(count) > 100_000 and collecting == "True"


def test_importing_the_package_collects_no_garbage_and_leaves_the_collector_as_it_was():
    """No collection runs while the package imports PyTorch and its models (once done, the
    collector is on again, or still off if it was)."""
    code = ("import gc, sys\n"
            "collections = []\n"
            "def importing():\n"
            "    package = sys.modules.get('transformer')\n"
            "    names = vars(package) if package is not None else {}\n"
            "    return '_collecting' in names and 'TransformerClassifier' not in names\n"
            "gc.callbacks.append(lambda phase, info: importing() and collections.append(phase))\n"
            "if sys.argv[1] == 'off':\n    gc.disable()\n"
            "import transformer\n"
            "print(len(collections), gc.isenabled())\n")
    for state, want in (("on", "True"), ("off", "False")):
        result = subprocess.run([sys.executable, "-c", code, state], capture_output=True, text=True,
                                check=True)
        assert result.stdout.split() == ["0", want]
