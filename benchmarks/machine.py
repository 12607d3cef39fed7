"""What machine a benchmark ran on, for the JSON it writes (imported by the scripts beside it)."""

from __future__ import annotations

import os
from typing import Any

# Environment variables that lower what the libraries use of the CPU (an AVX-512 machine made to
# behave as an AVX2 one): recorded with every figure, since they change it.
ISA_ENVIRONMENT = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA",
                   "MKL_ENABLE_INSTRUCTIONS", "CT2_FORCE_CPU_ISA", "OMP_NUM_THREADS")


def cpu_name() -> str:
    """The CPU's model name (e.g. "AMD EPYC"), or the platform's processor string."""
    from transformer.hardware import cpu_model

    return cpu_model()


def describe() -> dict[str, Any]:
    """The machine for a result's JSON: the CPU's model name, what PyTorch makes of it
    (``transformer.hardware.detect().to_dict()``: ATen capability, flags, native bf16, VNNI, int8
    engine, CUDA devices), and any of :data:`ISA_ENVIRONMENT` that is set."""
    from transformer import hardware

    machine = hardware.detect()
    return {"cpu_name": cpu_name(), "summary": machine.summary(), **machine.to_dict(),
            "isa_environment": {k: os.environ[k] for k in ISA_ENVIRONMENT if k in os.environ}}


RECIPE_MODEL = ("transformer train --preset multi30k-cpu --src en --tgt de --out {path}  "
                "# the one-hour recipe (60 minutes on 2 cores)")


def require_model(path: str | os.PathLike[str], *, script: str, make: str = RECIPE_MODEL) -> None:
    """Exit with status 2 and the command that makes it when ``path`` holds no model directory:
    a benchmark on a fresh clone then says what to run first, not a missing-file traceback."""
    import sys
    from pathlib import Path

    if not (Path(path) / "config.json").is_file():
        print(f"{script}: no model in {path}; make one first:\n  {make.format(path=path)}",
              file=sys.stderr)
        sys.exit(2)
