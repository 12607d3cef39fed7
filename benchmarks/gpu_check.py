"""GPU check: every CUDA path of the package checked and measured by one command on one GPU.

The checks are the tests in tests/gpu/ (marked ``cuda``), one per part; this script runs them with
pytest and turns what each recorded into a table and a JSON report:

1. device: ``resolve_device("auto")`` picks the GPU, ``hardware.detect()`` lists it with its bf16
   flag, ``precision_for_model("auto")`` picks bf16 on a bf16 GPU (fp16 for training without it);
2. reference: our layers equal ``torch.nn.Transformer`` with copied weights on the device, fp32
   with TF32 off, forward (evaluation mode) and weight gradients (training mode);
3. training: the project's ``Trainer`` runs the same steps of a copy task from the same weights
   in fp32, bf16 autocast and fp16 autocast with its GradScaler; losses agree and fall;
4. decoding: greedy and beam search (beam 4) on the device equal the CPU's token for token,
   cached equal uncached on the device, and bf16 decoding runs;
5. memory: ``estimate_training_memory`` against ``torch.cuda.max_memory_allocated`` of real steps;
6. throughput: the paper's base model, training tokens/s of ours against ``torch.nn.Transformer``
   in one process, steps alternating, bf16 autocast and fp32 (reported, not asserted);
7. what one GPU cannot check: multi-GPU NCCL DDP (needs two devices; not simulated).

A failure in one part is that test's failure; the others still run and report. Each part has its
own time limit (its ``pytest.mark.timeout``, 6 minutes and 15 s in all); on an NVIDIA H200 the
run took 88-90 s.

    .venv/bin/python benchmarks/gpu_check.py                          # on a machine with a CUDA GPU
    .venv/bin/python benchmarks/gpu_check.py --device cpu --quick     # the same tests, tiny, on a CPU
    .venv/bin/python -m pytest -m cuda tests/gpu                      # the tests alone: pass or fail

Prints a table (part, result, figures, tolerance) and writes benchmarks/results/gpu_check.json
(``--out`` to change; a ``--quick`` run writes to the temp directory unless ``--out`` is given,
so a smoke run never overwrites the real figures). Exit status: 0 all ok (skips allowed),
1 a part failed, 2 no CUDA device and no ``--device cpu``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "gpu"
RESULTS = ROOT / "benchmarks" / "results" / "gpu_check.json"
PARTS = ("device", "reference", "training", "decoding", "memory", "throughput", "ddp")
NOT_CHECKED = ("multi-GPU NCCL DDP (torchrun --nproc-per-node 2 -m transformer train ...) needs two "
               "devices: not checked here and not simulated")


class Collect:
    """A pytest plugin: each test's outcome, time and record (its user property ``gpu_check``)."""

    def __init__(self) -> None:
        self.parts: dict[str, dict[str, Any]] = {}

    def part(self, report: pytest.TestReport | pytest.CollectReport) -> dict[str, Any]:
        name = Path(report.fspath).stem.removeprefix("test_")
        return self.parts.setdefault(report.nodeid, {"name": name, "result": "ok", "seconds": 0.0,
                                                     "reason": None, "error": None,
                                                     "traceback": None})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        part = self.part(report)
        part["seconds"] = round(part["seconds"] + report.duration, 2)
        for key, value in report.user_properties:
            if key == "gpu_check":
                part.update(value)
        if report.skipped:
            reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
            part.update(result="skipped", reason=reason.removeprefix("Skipped: "))
        elif report.failed and part["result"] != "FAIL":
            self.failed(part, report, report.when)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # a test module that does not import: its part fails
            self.failed(self.part(report), report, "collection")

    @staticmethod
    def failed(part: dict[str, Any], report: pytest.TestReport | pytest.CollectReport,
               when: str) -> None:
        crash = getattr(report.longrepr, "reprcrash", None)
        lines = [line for line in report.longreprtext.splitlines() if line.strip()]
        message = crash.message if crash else (lines[-1].removeprefix("E").strip() if lines else "")
        part.update(result="FAIL", error=f"{when}: {message.splitlines()[0] if message else ''}",
                    traceback=lines[-16:])


def environment(device: torch.device) -> dict[str, Any]:
    from transformer.hardware import detect

    env: dict[str, Any] = {
        "device": str(device), "python": platform.python_version(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "platform": platform.platform(), "threads": torch.get_num_threads(),
    }
    try:
        env["machine"] = detect().to_dict()
        env["machine_summary"] = detect().summary()
    except Exception as e:  # the device part reports it too
        env["machine"] = {"error": f"{type(e).__name__}: {e}"}
    return env


def print_table(parts: list[dict[str, Any]]) -> None:
    print(f"{'part':<11} {'result':<8} {'figures':<80} tolerance")
    for p in parts:
        figures = p.get("summary") or p.get("reason") or p.get("error") or ""
        if p["result"] == "skipped" and p.get("reason") and p.get("summary"):
            figures = f"{p['summary']} ({p['reason']})"
        left = textwrap.wrap(figures, 80) or [""]
        right = textwrap.wrap(p.get("tolerance", ""), 48) or [""]
        for i in range(max(len(left), len(right))):
            a = left[i] if i < len(left) else ""
            b = right[i] if i < len(right) else ""
            head = f"{p['name']:<11} {p['result']:<8}" if i == 0 else " " * 20
            print(f"{head} {a:<80} {b}".rstrip())
        for c in p.get("checks", []):
            if c["ok"] is False:
                print(f"{'':<11} {'':<8}   FAIL {c['check']}: {c['detail']}")
            elif c["ok"] is None:
                print(f"{'':<11} {'':<8}   skipped {c['check']}: {c['detail']}")
        if p["result"] == "FAIL" and p.get("error") and not any(
                c["ok"] is False for c in p.get("checks", [])):  # failed checks say it above
            print(f"{'':<11} {'':<8}   {p['error']}")
            for line in (p.get("traceback") or [])[-4:]:
                print(f"{'':<11} {'':<8}   | {line}")


def run_tests(wanted: list[str]) -> tuple[int, list[dict[str, Any]]]:
    """pytest on the wanted parts' tests, in the order of PARTS: its exit code and the parts."""
    collect = Collect()
    files = [str(TESTS / f"test_{name}.py") for name in PARTS if name in wanted and name != "ddp"]
    code = pytest.ExitCode.OK
    if files:  # (pytest with no file would run the whole suite)
        code = pytest.main(["-m", "cuda", "-q", "-p", "no:cacheprovider",
                            "--continue-on-collection-errors", *files], plugins=[collect])
    parts = list(collect.parts.values())
    if "ddp" in wanted:
        parts.append({"name": "ddp", "result": "skipped", "seconds": 0.0, "reason": NOT_CHECKED,
                      "error": None, "traceback": None, "tolerance": "-", "summary": "",
                      "budget_s": 0.0, "checks": [],
                      "figures": {"cuda_devices": torch.cuda.device_count()}})
    return int(code), parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="auto (default) and cuda need a CUDA GPU; cpu runs the same checks "
                             "on the CPU (fp16 skipped)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="comma-separated parts to run (default: all)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file (default benchmarks/results/gpu_check.json; with --quick "
                             "gpu_check_quick.json in the temp directory)")
    args = parser.parse_args(argv)
    began = time.monotonic()
    wanted = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(PARTS))
    if unknown:
        print(f"gpu_check: unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}",
              file=sys.stderr)
        return 2
    if args.device != "cpu" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (torch " + torch.__version__ + "); run on a GPU "
              "machine, or pass --device cpu [--quick] to check the CPU paths", file=sys.stderr)
        return 2
    device = torch.device("cpu") if args.device == "cpu" else torch.device("cuda", 0)
    os.environ["GPU_CHECK_DEVICE"] = device.type  # what tests/gpu/conftest.py reads
    os.environ["GPU_CHECK_QUICK"] = "1" if args.quick else "0"
    if device.type == "cpu" and hasattr(os, "sched_getaffinity"):  # the cores this process may use
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    quick_out = Path(tempfile.gettempdir()) / "gpu_check_quick.json"
    out = args.out or (quick_out if args.quick else RESULTS)
    env = environment(device)
    print(f"gpu_check on {env['gpu'] or 'cpu'} (torch {env['torch']}, CUDA {env['cuda']}); "
          f"{env.get('machine_summary', '')}", flush=True)
    code, parts = run_tests(wanted)
    total = round(time.monotonic() - began, 1)
    print()
    print_table(parts)
    print(f"\nnot checked on one GPU: {NOT_CHECKED}")
    failed = [p["name"] for p in parts if p["result"] == "FAIL"]
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and not failed:
        failed = [f"pytest exit status {code}"]  # a usage or collection error: no part ran
    report = {"environment": env, "args": {k: str(v) for k, v in vars(args).items()},
              "quick": args.quick, "seconds": total, "failed": failed,
              "not_checked": [NOT_CHECKED], "parts": parts}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(out)
    print(f"{len(parts) - len(failed)} of {len(parts)} parts without failure in {total:.0f} s; "
          f"wrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
