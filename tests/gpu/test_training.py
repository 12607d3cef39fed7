"""GPU check, training: the project's ``Trainer`` runs the same steps of a copy task from the same
weights in fp32, bf16 autocast and fp16 autocast with its GradScaler (fp16 on CUDA only); every
loss is finite, the loss falls, and bf16/fp16 stay within ``LOSS_RTOL`` of fp32 at every step."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
import torch

from transformer import ModelConfig, Transformer

pytestmark = pytest.mark.cuda
LOSS_RTOL = 0.05  # bf16/fp16 training loss against fp32, at each logged step
MAX_EARLY_SKIPS = 5  # fp16: the grad scaler may skip updates only among the first steps


def copy_batches(gpu, n: int, rows: int, vocab: int, *, min_len: int, max_len: int) -> list[Any]:
    """A copy task: ``n`` batches of ``rows`` random sentences; the target is the source."""
    from transformer.data.batch_types import Batch

    pad, bos, eos = gpu.PAD, gpu.BOS, gpu.EOS
    out = []
    for i in range(n):
        src = gpu.random_sources(rows, vocab, min_len=min_len, max_len=max_len, seed=100 + i)
        lengths = (src != pad).sum(1)
        tgt_in = torch.full((rows, max_len + 1), pad)
        tgt_out = torch.full((rows, max_len + 1), pad)
        for r in range(rows):
            ids = src[r, : lengths[r]]
            tgt_in[r, : lengths[r] + 1] = torch.cat([torch.tensor([bos]), ids])
            tgt_out[r, : lengths[r] + 1] = torch.cat([ids, torch.tensor([eos])])
        out.append(Batch(src, tgt_in, tgt_out, int(lengths.sum()), int((tgt_out != pad).sum())))
    return out


class FixedBatches:
    """The same batches in the same order every epoch."""

    def __init__(self, batches: list[Any]) -> None:
        self.batches = batches

    def for_epoch(self, epoch: int) -> list[Any]:
        return self.batches


def train_losses(gpu, cfg: ModelConfig, init: dict[str, torch.Tensor], batches: list[Any], *,
                 precision: str, steps: int, peak_lr: float, warmup: int) -> dict[str, Any]:
    """Train a copy of ``init`` through the project's Trainer; the loss and scale of every step."""
    from transformer.training.optimizer import build_optimizer
    from transformer.training.schedule import LRSchedule, build_scheduler
    from transformer.training.trainer import LoopConfig, Trainer
    from transformer.training.translation_task import TranslationTask

    class RecordingTrainer(Trainer):
        records: list[dict[str, Any]]

        def write_metrics(self, record: dict[str, Any]) -> None:  # no run_dir: keep in memory
            if record.get("kind") == "train" and self.scaler is not None:
                record = {**record, "scale": float(self.scaler.get_scale())}
            self.records.append(record)

    model = Transformer(cfg)
    model.load_state_dict(init)
    model.to(gpu.device)
    optimizer = build_optimizer(model)
    scheduler = build_scheduler(optimizer, schedule=LRSchedule(kind="inverse_sqrt", warmup=warmup,
                                                               peak_lr=peak_lr))
    trainer = RecordingTrainer(model=model, task=TranslationTask(), optimizer=optimizer,
                               scheduler=scheduler, train_data=FixedBatches(batches),
                               config=LoopConfig(max_steps=steps, log_every=1, eval_every=0,
                                                  precision=precision, clip_norm=1.0),
                               device=gpu.device)
    trainer.records = []
    initial_scale = float(trainer.scaler.get_scale()) if trainer.scaler is not None else None
    start = time.perf_counter()
    result = trainer.fit()
    gpu.sync()
    seconds = time.perf_counter() - start
    train = [r for r in trainer.records if r["kind"] == "train"]
    losses = [float(r["loss"]) for r in train]
    skipped: list[int] = []  # updates the grad scaler skipped (its scale halves on each)
    if initial_scale is not None:
        scales = [initial_scale] + [r["scale"] for r in train]
        skipped = [i for i in range(1, len(scales)) if scales[i] < scales[i - 1]]
    return {"losses": losses, "steps": result.steps, "seconds": round(seconds, 2),
            "skipped_by_scaler": skipped, "trainer_skipped_updates": trainer.state.skipped_updates,
            "final_scale": None if initial_scale is None else train[-1]["scale"]}


def max_rel_diff(losses: list[float], ref: list[float], skipped: list[int]) -> tuple[float, int]:
    """The largest relative difference from fp32's losses, and its step (1-based). A skipped
    update leaves the weights as they were: a step is compared with fp32's loss that many updates
    earlier."""
    rel = []
    for i, x in enumerate(losses):
        j = i - sum(1 for s in skipped if s <= i)
        rel.append(abs(x - ref[j]) / abs(ref[j]))
    worst = max(rel)
    return worst, rel.index(worst) + 1


@pytest.mark.timeout(60)
def test_bf16_and_fp16_training_follow_fp32(gpu, record):
    if gpu.quick:
        cfg = ModelConfig(src_vocab_size=48, tgt_vocab_size=48, d_model=64, num_heads=4,
                          num_encoder_layers=1, num_decoder_layers=1, d_ff=128, dropout=0.0,
                          max_len=32)
        steps, n_batches, rows, lengths, peak_lr, warmup = 16, 4, 16, (4, 8), 3e-3, 4
    else:
        # a small vocabulary, so 30 updates get well into learning to copy (about 0.6x the
        # first loss on a CPU), where bf16 stays within about 2% of fp32
        cfg = ModelConfig(src_vocab_size=64, tgt_vocab_size=64, d_model=256, num_heads=4,
                          num_encoder_layers=2, num_decoder_layers=2, d_ff=1024, dropout=0.0,
                          max_len=64)
        steps, n_batches, rows, lengths, peak_lr, warmup = 30, 10, 64, (8, 12), 2e-3, 8
    record.tolerance = (f"bf16/fp16 loss within {LOSS_RTOL:.0%} of fp32 at every step; final "
                        f"loss < 0.8x first; scaler skips only in the first {MAX_EARLY_SKIPS} "
                        "steps")
    torch.manual_seed(0)
    init = {k: v.clone() for k, v in Transformer(cfg).state_dict().items()}
    batches = copy_batches(gpu, n_batches, rows, cfg.src_vocab_size, min_len=lengths[0],
                           max_len=lengths[1])
    record.figures.update(config=cfg.to_dict(), steps=steps, batches=n_batches, rows=rows,
                          peak_lr=peak_lr, warmup=warmup, dropout=0.0,
                          note="dropout 0 so the runs differ by arithmetic only")
    runs: dict[str, dict[str, Any]] = {}
    for precision in ("fp32", "bf16", "fp16"):
        if precision == "fp16" and not gpu.cuda:
            record.skip_check("fp16 autocast + GradScaler", "fp16 needs CUDA")
            continue
        runs[precision] = run = train_losses(gpu, cfg, init, batches, precision=precision,
                                             steps=steps, peak_lr=peak_lr, warmup=warmup)
        record.figures[precision] = run
        losses = run["losses"]
        record.check(f"{precision}: {steps} steps, every loss finite",
                     len(losses) == steps and all(math.isfinite(x) for x in losses),
                     f"{len(losses)} losses, first {losses[0]:.4f}, last {losses[-1]:.4f}")
        record.check(f"{precision}: loss decreases", losses[-1] < 0.8 * losses[0],
                     f"{losses[0]:.4f} -> {losses[-1]:.4f} ({losses[-1] / losses[0]:.2f}x)")
        skipped = run["skipped_by_scaler"]
        if precision == "fp16":
            early = all(s <= MAX_EARLY_SKIPS for s in skipped)
            record.check("fp16: scaler skips only early steps",
                         early and len(skipped) <= MAX_EARLY_SKIPS,
                         f"skipped steps {skipped}, final scale {run['final_scale']}")
        if precision != "fp32" and "fp32" in runs:
            worst, step = max_rel_diff(losses, runs["fp32"]["losses"], skipped)
            run["max_rel_diff_vs_fp32"] = worst
            record.check(f"{precision}: loss vs fp32 at every step", worst <= LOSS_RTOL,
                         f"max rel diff {worst:.2%} (step {step})"
                         + (f", aligned past {len(skipped)} skipped" if skipped else ""))
    record.summary = "; ".join(
        f"{p} {r['losses'][0]:.3f}->{r['losses'][-1]:.3f}"
        + (f" (max {r['max_rel_diff_vs_fp32']:.1%} off)" if "max_rel_diff_vs_fp32" in r else "")
        + (f" skips {r['skipped_by_scaler']}" if p == "fp16" else "")
        for p, r in runs.items())
    assert not record.failures(), "\n".join(record.failures())
