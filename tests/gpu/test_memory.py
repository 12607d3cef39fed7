"""GPU check, memory: ``estimate_training_memory`` against the peak of real training steps,
``torch.cuda.max_memory_allocated`` on a GPU (on a CPU: live tensor storage), within
``MEMORY_RTOL``."""

from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

from transformer import ModelConfig

pytestmark = pytest.mark.cuda
MEMORY_RTOL = 0.10  # memory estimate / measured peak


def allocated_before(device: torch.device) -> int:
    """Bytes allocated on the GPU before a measurement, with cuBLAS(Lt)'s workspaces already
    made (they stay for the process), and the peak statistics reset."""
    gc.collect()
    torch.cuda.empty_cache()
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = torch.ones(64, 64, device=device, dtype=dtype)
        x @ x
        nn.functional.linear(x, x, x[0])
    del x
    torch.cuda.synchronize(device)
    baseline = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    return baseline


@pytest.mark.timeout(60)
def test_memory_estimate_against_measured_peak(gpu, record):
    from transformer.memory import (
        TrainingStep,
        estimate_training_memory,
        format_bytes,
        measure_training_peak,
    )

    # (preset, vocabulary, batch, length, precision, encoder_only)
    if gpu.quick:
        rows = [("tiny", 1000, b, 20, p, False) for p in ("fp32", "bf16") for b in (4, 8)]
        rows.append(("tiny", 1000, 8, 24, "fp32", True))
    else:
        rows = [("base", 8000, b, 48, p, False) for p in ("fp32", "bf16") for b in (16, 64, 128)]
        rows += [("base", 8000, 64, 48, "fp16", False), ("small", 8000, 64, 128, "bf16", True)]
    record.tolerance = f"estimate / measured within {MEMORY_RTOL:.0%}"
    record.figures["method"] = (
        "torch.cuda.max_memory_allocated of the second step (peaks reset per phase), less what "
        "was allocated before" if gpu.cuda else
        "live tensor storage (TorchDispatchMode): the project's CPU counterpart")
    table = record.figures["rows"] = []
    for preset, vocab, batch, length, precision, encoder_only in rows:
        if record.left() < 5:
            record.skip_check(f"{preset} b{batch} {precision}", "part's time budget spent")
            continue
        cfg = ModelConfig.preset(preset, vocab)
        step = TrainingStep(batch_size=batch, src_len=length,
                            tgt_len=None if encoder_only else length, precision=precision,
                            encoder_only=encoder_only, num_labels=28 if encoder_only else 2)
        name = (f"{preset} {'classifier' if encoder_only else 'translation'} b{batch} "
                f"len{length} {precision}")
        estimate = estimate_training_memory(cfg, step, device=gpu.device.type)
        baseline = allocated_before(gpu.device) if gpu.cuda else 0
        measured = measure_training_peak(cfg, step, device=str(gpu.device))
        net = measured.peak_bytes - baseline
        ratio = estimate.peak_bytes / max(net, 1)
        table.append({"name": name, "estimate_bytes": estimate.peak_bytes,
                      "measured_bytes": measured.peak_bytes, "baseline_bytes": baseline,
                      "ratio": round(ratio, 4), "estimate_phase": estimate.peak_phase,
                      "measured_phase_peaks": measured.phase_peaks})
        record.check(name, abs(ratio - 1) <= MEMORY_RTOL,
                     f"estimate {format_bytes(estimate.peak_bytes)}, measured {format_bytes(net)}"
                     f"{f' (+{format_bytes(baseline)} before)' if baseline else ''}, "
                     f"ratio {ratio:.3f}")
    if table:
        ratios = [r["ratio"] for r in table]
        record.summary = (f"{len(table)} rows, estimate/measured {min(ratios):.3f}-"
                          f"{max(ratios):.3f}" + ("" if gpu.cuda else " (CPU: live tensor bytes)"))
    assert table, "no row measured within the part's time limit"
    assert not record.failures(), "\n".join(record.failures())
