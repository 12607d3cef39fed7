"""What a run's arithmetic depends on besides its weights, data order and random numbers: the CPU
threads PyTorch splits its work over, the kernels this kind of machine selects, PyTorch itself.

The thread count is the one a resume used to change: PyTorch and MKL split reductions and matrix
products by thread, so 1 and 2 threads round differently, and training grows the difference. A run
started with ``--threads 1`` and resumed without it where PyTorch takes 2 threads (a machine with
more cores) ended with all 68 weight tensors of the tiny preset different from an uninterrupted
run's (400 updates on the ``numbers`` data, killed at update 47: losses 6e-5 apart at the end,
weights 3.5e-3 at most), on a Zen 4 forced down to AVX2 and at its own AVX-512 alike. With the
same count the runs were equal to the last bit, killed anywhere; MKL's reproducibility modes
(``MKL_CBWR``) made no difference either way. So every checkpoint records :func:`arithmetic` and a
resume sets the recorded thread count back (:func:`restore_arithmetic`).

The machine itself (PyTorch's CPU capability, the CPU model, a GPU's name) and PyTorch's version
are recorded too but cannot be set back: a run resumed on another kind of machine continues with
the same data order and random numbers but rounds differently, so its weights drift from an
uninterrupted run's as above, and it says so.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from transformer.hardware import detect_cpu

log = logging.getLogger(__name__)

MACHINE_KEYS = ("cpu_capability", "cpu_model", "cuda_device", "torch")


def arithmetic(device: torch.device | str | None = None) -> dict[str, Any]:
    """This process's CPU thread count, machine kind and PyTorch version, as plain values
    (``weights_only``-safe); ``cuda_device`` names the GPU when ``device`` is one."""
    cpu = detect_cpu()
    # str(): torch.__version__ is a str subclass that weights_only loading refuses
    found: dict[str, Any] = {"threads": int(torch.get_num_threads()),
                             "cpu_capability": str(cpu.capability), "cpu_model": str(cpu.model),
                             "torch": str(torch.__version__)}
    device = torch.device(device) if device is not None else None
    if device is not None and device.type == "cuda":
        found["cuda_device"] = str(torch.cuda.get_device_name(device))
    return found


def restore_arithmetic(saved: dict[str, Any], device: torch.device | str | None = None) -> None:
    """Set this process's thread count to the one ``saved`` (an :func:`arithmetic`) records, as
    ``--threads`` would; warn where the machine kind or PyTorch differ, which nothing can set back."""
    threads = int(saved.get("threads") or 0)
    now = torch.get_num_threads()
    if threads and threads != now:
        log.warning("resuming with %d CPU thread%s as the run was started, not %d: another count "
                    "rounds differently and the run would no longer end as an uninterrupted one",
                    threads, "" if threads == 1 else "s", now)
        torch.set_num_threads(threads)
    here = arithmetic(device)
    changed = [f"{key} {saved[key]} -> {here.get(key)}" for key in MACHINE_KEYS
               if key in saved and saved[key] != here.get(key)]
    if changed:
        log.warning("resumed on another kind of machine (%s): the same data order and random "
                    "numbers, but another rounding: the weights will not end bit for bit as an "
                    "uninterrupted run's", "; ".join(changed))
