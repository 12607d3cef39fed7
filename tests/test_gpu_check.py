"""benchmarks/gpu_check.py runs its CPU smoke run: every part reported, none failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
PARTS = ["device", "reference", "training", "decoding", "memory", "throughput", "ddp"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300, cwd=SCRIPT.parents[1])


@pytest.mark.slow  # 10-30 s on one shared core, most of it starting Python and torch twice
def test_cpu_quick_run_reports_every_part_and_no_failure(tmp_path):
    out = tmp_path / "gpu_check.json"
    proc = run("--device", "cpu", "--quick", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    results = {p["name"]: p["result"] for p in report["parts"]}
    assert list(results) == PARTS
    assert "FAIL" not in results.values(), proc.stdout
    assert results["ddp"] == "skipped"  # needs two GPUs: said, not simulated
    assert all(results[name] == "ok" for name in PARTS[:-1]), results
    assert report["environment"]["machine"]["cpu"]["capability"]
    assert report["environment"]["torch"] == torch.__version__
    assert report["not_checked"] and "DDP" in report["not_checked"][0]
    for line in ("part", "device", "throughput", "not checked on one GPU"):
        assert line in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_so_and_exits_2(tmp_path):
    proc = run("--out", str(tmp_path / "never.json"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no CUDA device" in proc.stderr
    assert not (tmp_path / "never.json").exists()
