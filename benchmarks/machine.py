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
