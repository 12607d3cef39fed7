"""The GPU check (tests/gpu/, run by benchmarks/gpu_check.py): its CPU smoke run reports every part
and fails none; every test in tests/gpu/ is marked ``cuda``, and ``make test`` deselects that
marker, so a machine without a GPU neither runs nor skips them there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
PARTS = ["device", "reference", "training", "decoding", "memory", "throughput", "ddp"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


@pytest.mark.slow  # 10-30 s on one shared core, most of it starting Python and torch twice
def test_cpu_quick_run_reports_every_part_and_no_failure(tmp_path):
    out = tmp_path / "gpu_check.json"
    proc = run(str(SCRIPT), "--device", "cpu", "--quick", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    results = {p["name"]: p["result"] for p in report["parts"]}
    assert list(results) == PARTS
    assert "FAIL" not in results.values(), proc.stdout
    assert results["ddp"] == "skipped"  # needs two GPUs: said, not simulated
    assert all(results[name] == "ok" for name in PARTS[:-1]), results
    for part in report["parts"][:-1]:  # each test filled its record
        assert part["tolerance"] and part["summary"] and part["checks"], part["name"]
    assert report["environment"]["machine"]["cpu"]["capability"]
    assert report["environment"]["torch"] == torch.__version__
    assert report["not_checked"] and "DDP" in report["not_checked"][0]
    for line in ("part", "device", "throughput", "not checked on one GPU"):
        assert line in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_so_and_exits_2(tmp_path):
    proc = run(str(SCRIPT), "--out", str(tmp_path / "never.json"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no CUDA device" in proc.stderr
    assert not (tmp_path / "never.json").exists()


def test_every_gpu_test_is_marked_cuda_and_make_test_deselects_them():
    proc = run("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               "-m", "not cuda", "tests/gpu")
    assert proc.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, proc.stdout + proc.stderr
    assert f"{len(PARTS) - 1} deselected" in proc.stdout  # one test a part; ddp is not a test
    makefile = (ROOT / "Makefile").read_text()
    for target in ("test", "test-avx2"):
        recipe = makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
        runs = [line for line in recipe.splitlines() if "-m pytest" in line]
        assert runs and all('-m "not slow and not cuda"' in line for line in runs), target
