"""GPU check, throughput: the paper's base model, training tokens/s of ours against
``torch.nn.Transformer`` (and ours with the trainer's loss and fused Adam) in one process, steps
alternating, bf16 autocast then fp32, with MFU against a matmul peak measured in the same run.

A measurement, reported in the record's figures: no pass/fail on speed. The test asserts that
every contender's loss stays finite."""

from __future__ import annotations

import importlib
import math
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from transformer import ModelConfig, Transformer

pytestmark = pytest.mark.cuda
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
ROUND_SECONDS = 25.0  # timed throughput rounds per precision (the base model: about 1 min in all)


def matmul_peak(gpu, dtype: torch.dtype, size: int, repeats: int = 5) -> float:
    """Measured GFLOP/s of a square matmul on the device: the ceiling for MFU."""
    a = torch.randn(size, size, device=gpu.device, dtype=dtype)
    b = torch.randn(size, size, device=gpu.device, dtype=dtype)
    for _ in range(2):
        a @ b
    best = math.inf
    for _ in range(repeats):
        gpu.sync()
        start = time.perf_counter()
        for _ in range(4):
            a @ b
        gpu.sync()
        best = min(best, (time.perf_counter() - start) / 4)
    return 2 * size**3 / best / 1e9


@pytest.fixture
def train_throughput(monkeypatch):
    """benchmarks/train_throughput.py: the reference model, batches, FLOPs and losses."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports benchmarks/machine.py
    return importlib.import_module("train_throughput")


@pytest.mark.timeout(120)
def test_training_throughput_against_nn_transformer(gpu, record, train_throughput):
    from transformer.training.optimizer import build_optimizer

    bench = train_throughput
    if gpu.quick:
        cfg = ModelConfig(src_vocab_size=500, tgt_vocab_size=500, d_model=64, num_heads=4,
                          num_encoder_layers=1, num_decoder_layers=1, d_ff=256, dropout=0.1,
                          max_len=64)
        batch, length, n_batches, peak_size, max_rounds = 8, 12, 2, 256, 2
    else:
        cfg = ModelConfig.base(32000)  # the paper's base model, a paper-sized vocabulary
        batch, length, n_batches, peak_size, max_rounds = 128, 32, 8, 8192, 40
    record.tolerance = "a measurement: no pass/fail on speed; every loss finite"
    torch.manual_seed(0)
    models: dict[str, nn.Module] = {"ours": Transformer(cfg),
                                    "torch": bench.TorchReference(Transformer(cfg)),
                                    "ours+opts": Transformer(cfg)}
    for m in models.values():
        m.to(gpu.device).train()
    optimizers = {
        name: (build_optimizer(m, lr=1e-4) if name == "ours+opts"  # the trainer's fused Adam
               else torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9))
        for name, m in models.items()}
    losses = {"ours": bench.torch_loss, "torch": bench.torch_loss, "ours+opts": bench.project_loss}
    batches = [tuple(x.to(gpu.device) for x in b)
               for b in bench.make_batches(cfg, n_batches, batch, length, length)]
    tokens = sum(int((s != gpu.PAD).sum() + (t != gpu.PAD).sum()) for s, _, t in batches)
    flops = bench.train_flops(cfg, batch, length, length) * len(batches)
    record.figures.update(config=cfg.to_dict(), batch=batch, src_len=length, tgt_len=length,
                          tokens_per_step=tokens // len(batches), steps_per_round=len(batches),
                          contenders={"ours": "our model, F.cross_entropy, torch Adam",
                                      "torch": "torch.nn.Transformer stacks, same embeddings, "
                                               "loss and Adam",
                                      "ours+opts": "our model, the trainer's loss and fused Adam"},
                          tf32_matmul=torch.backends.cuda.matmul.allow_tf32)
    last_loss: dict[str, torch.Tensor] = {}

    def step(name: str, precision: str, src: torch.Tensor, tgt_in: torch.Tensor,
             tgt_out: torch.Tensor) -> None:
        model, opt = models[name], optimizers[name]
        with gpu.autocast(precision):
            logits = model(src, tgt_in)
        loss = losses[name](logits, tgt_out)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        last_loss[name] = loss.detach()

    results = record.figures["rows"] = []
    summary = []
    for k, precision in enumerate(("bf16", "fp32")):
        # at most ROUND_SECONDS of timed rounds per precision, and never past the part's budget
        # (bf16, the run's default on a GPU, first; the time left split between the two)
        share = 0.5 if k == 0 else 0.9
        stop = time.monotonic() + min(ROUND_SECONDS, share * max(record.left() - 10, 0))
        if record.left() < 15:
            record.skip_check(f"{precision} throughput", "part's time budget spent")
            continue
        for name in models:  # warm-up: kernels, allocator, cuBLAS heuristics
            for b in batches[:2]:
                step(name, precision, *b)
        gpu.sync()
        times: dict[str, list[float]] = {name: [] for name in models}
        rounds = 0
        while rounds < max_rounds and (rounds < 2 or time.monotonic() < stop):
            order = list(models) if rounds % 2 == 0 else list(reversed(models))
            for name in order:
                gpu.sync()
                start = time.perf_counter()
                for b in batches:
                    step(name, precision, *b)
                gpu.sync()
                times[name].append(time.perf_counter() - start)
            rounds += 1
        finite = all(math.isfinite(v.item()) for v in last_loss.values())
        record.check(f"{precision}: every contender's loss finite", finite,
                     ", ".join(f"{n} {v.item():.3f}" for n, v in last_loss.items()))
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        peak = matmul_peak(gpu, dtype, peak_size)
        row: dict[str, Any] = {"precision": precision, "rounds": rounds,
                               "matmul_peak_gflops": round(peak, 1)}
        for name, ts in times.items():
            best, median = min(ts), sorted(ts)[len(ts) // 2]
            row[f"{name}_tokens_per_s"] = round(tokens / best)
            row[f"{name}_tokens_per_s_median"] = round(tokens / median)
            row[f"{name}_ms_per_step"] = round(best / len(batches) * 1e3, 2)
            row[f"{name}_mfu"] = round(flops / best / 1e9 / peak, 3)
        for name in ("ours", "ours+opts"):
            row[f"{name}_vs_torch"] = round(row[f"{name}_tokens_per_s"]
                                            / row["torch_tokens_per_s"], 3)
        results.append(row)
        summary.append(f"{precision} ours {row['ours_tokens_per_s']:,} tok/s = "
                       f"{row['ours_vs_torch']:.2f}x torch "
                       f"(+opts {row['ours+opts_vs_torch']:.2f}x), MFU {row['ours_mfu']:.0%}")
    record.summary = "; ".join(summary)
    assert not record.failures(), "\n".join(record.failures())
