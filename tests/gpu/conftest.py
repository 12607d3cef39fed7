"""The GPU check: every CUDA path of the package, one test per part (device choice, the
``nn.Transformer`` reference, training precisions, decoding, the memory estimate, throughput).

Every test here is marked ``cuda``. On a machine with a CUDA GPU::

    .venv/bin/python -m pytest -m cuda tests/gpu        # pass or fail
    .venv/bin/python benchmarks/gpu_check.py            # the same tests, then a table and JSON

Without a GPU they skip ("no CUDA device here", a skip tests/conftest.py declares for such a
machine), and ``make test`` deselects them (``-m "not slow and not cuda"``). Two variables change
where and how big they run, for a smoke run on a CPU: ``GPU_CHECK_DEVICE=cpu`` (the default is
``cuda``: the first GPU) and ``GPU_CHECK_QUICK=1`` (tiny sizes, seconds a part).

Each test fills a :class:`Record` (the ``record`` fixture): its tolerance, the checks it made, a
one-line summary and its figures. The record travels as the test's user property ``gpu_check``,
which benchmarks/gpu_check.py turns into its table and JSON. A test's time limit is its
``pytest.mark.timeout``; parts that loop watch :meth:`Record.left` so they end inside it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

NO_CUDA = ("no CUDA device here (GPU_CHECK_DEVICE=cpu runs the GPU check on the CPU, "
           "GPU_CHECK_QUICK=1 tiny)")


@dataclass(frozen=True)
class GpuCheck:
    """Where the check runs, and what its parts share."""

    device: torch.device
    quick: bool  # tiny sizes: a smoke run

    PAD = 0
    BOS = 2
    EOS = 3

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def autocast(self, precision: str) -> contextlib.AbstractContextManager:
        """``torch.autocast`` for ``precision`` (bf16, fp16) on this device; fp32: nothing."""
        if precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def random_sources(self, n: int, vocab: int, *, min_len: int, max_len: int,
                       seed: int) -> torch.Tensor:
        """(n, max_len) ids in [4, vocab), row i of a random length in [min_len, max_len],
        right-padded; on the CPU."""
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(4, vocab, (n, max_len), generator=g)
        lengths = torch.randint(min_len, max_len + 1, (n,), generator=g)
        lengths[0] = max_len  # one full row, so no column is all padding
        src[torch.arange(max_len)[None, :] >= lengths[:, None]] = self.PAD
        return src


@dataclass
class Record:
    """What one part reports: checks (name, ok: True/False/None for skipped, detail), a summary
    (the table's figures column) and figures (the JSON's)."""

    name: str
    budget_s: float
    tolerance: str = ""
    summary: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def check(self, name: str, ok: bool | None, detail: str = "") -> bool:
        self.checks.append({"check": name, "ok": ok if ok is None else bool(ok), "detail": detail})
        return bool(ok)

    def skip_check(self, name: str, why: str) -> None:
        self.check(name, None, why)

    def failures(self) -> list[str]:
        """The checks that failed, one line each: what a test asserts is empty."""
        return [f"{c['check']}: {c['detail']}" for c in self.checks if c["ok"] is False]

    def left(self) -> float:
        """Seconds left of the part's time limit."""
        return self.started + self.budget_s - time.monotonic()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["started"]
        return out


@pytest.fixture(scope="session")
def gpu() -> GpuCheck:
    device = os.environ.get("GPU_CHECK_DEVICE", "cuda")
    if device not in ("cuda", "cpu"):
        raise pytest.UsageError(f"GPU_CHECK_DEVICE={device!r}: choose cuda or cpu")
    quick = os.environ.get("GPU_CHECK_QUICK", "") == "1"
    if device == "cpu":
        return GpuCheck(torch.device("cpu"), quick)
    if not torch.cuda.is_available():
        pytest.skip(NO_CUDA)
    torch.cuda.set_device(0)
    return GpuCheck(torch.device("cuda", 0), quick)


@pytest.fixture
def record(request, gpu: GpuCheck):
    """This part's :class:`Record`, named after its module (test_device.py: device), with the
    test's timeout as its budget. Afterwards the device is synchronized (an asynchronous CUDA
    error surfaces in the part that caused it) and its cache emptied for the next part."""
    limit = request.node.get_closest_marker("timeout")
    part = Record(Path(str(request.node.path)).stem.removeprefix("test_"),
                  budget_s=float(limit.args[0]) if limit else 900.0)
    yield part
    request.node.user_properties.append(("gpu_check", part.to_dict()))
    try:
        gpu.sync()
    finally:
        gc.collect()
        if gpu.cuda:
            with contextlib.suppress(Exception):  # a broken CUDA context is the part's error
                torch.cuda.empty_cache()
