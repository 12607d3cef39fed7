"""GPU check: every CUDA path of the package checked and measured by one command on one GPU.

Nothing in this project had run on a GPU before this script. It checks, part by part:

1. device: ``resolve_device("auto")`` picks the GPU, ``hardware.detect()`` lists it with its bf16
   flag, ``resolve_precision("auto")`` picks bf16 on a bf16 GPU (fp16 for training without it);
2. reference: our layers equal ``torch.nn.Transformer`` with copied weights on the device, fp32
   with TF32 off, forward (evaluation mode) and weight gradients (training mode);
3. training: the project's ``Trainer`` runs the same steps of a copy task from the same weights
   in fp32, bf16 autocast and fp16 autocast with its GradScaler; losses agree and fall;
4. decoding: greedy and beam search (beam 4) on the device equal the CPU's token for token,
   cached equal uncached on the device, and bf16 decoding runs;
5. memory: ``estimate_training_memory`` against ``torch.cuda.max_memory_allocated`` of real steps;
6. throughput: the paper's base model, training tokens/s of ours against ``torch.nn.Transformer``
   in one process, steps alternating, bf16 autocast and fp32;
7. what one GPU cannot check: multi-GPU NCCL DDP (needs two devices; not simulated).

Every part runs under its own time budget and its own try/except: a failure or a timeout in one
is recorded (error and traceback summary) and the others still report. The whole run should take
2-3 minutes on an H100 (an estimate from FLOPs: not yet run on one) and never runs a part past
5.5 minutes.

    .venv/bin/python benchmarks/gpu_check.py                          # on a machine with a CUDA GPU
    .venv/bin/python benchmarks/gpu_check.py --device cpu --quick     # the same code, tiny, on a CPU

Prints a table (part, result, figures, tolerance) and writes benchmarks/results/gpu_check.json
(``--out`` to change; a ``--quick`` run writes to the temp directory unless ``--out`` is given,
so a smoke run never overwrites the real figures). Exit status: 0 all ok (skips allowed),
1 a part failed, 2 no CUDA device and no ``--device cpu``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import math
import os
import platform
import signal
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from transformer import ModelConfig, Transformer
from transformer.convert.torch_reference import copy_from_nn_transformer as copy_weights

RESULTS = Path(__file__).resolve().parent / "results" / "gpu_check.json"
PAD, BOS, EOS = 0, 2, 3
TOTAL_BUDGET_S = 330.0  # no part runs past this (under 6 minutes with start-up and imports)
TIE_LOGPROB = 1e-4  # greedy rows that differ: log-probability gap at the first difference
TIE_SCORE = 1e-3  # beam rows that differ: gap between the two hypotheses' scores
LOSS_RTOL = 0.05  # bf16/fp16 training loss against fp32, at each logged step
MEMORY_RTOL = 0.10  # memory estimate / measured peak
ROUND_SECONDS = 25.0  # timed throughput rounds per precision (the base model: about 1 min in all)


# --- the frame: parts, budgets, guards --------------------------------------------------------


class Skip(Exception):
    """Raised by a part that does not apply here (the message says why)."""


class PartTimeout(Exception):
    """Raised inside a part when its time budget is spent."""


@dataclass
class Part:
    """One part's outcome: checks (name, ok: True/False/None for skipped, detail) and figures."""

    name: str
    tolerance: str = ""
    result: str = "ok"  # ok, FAIL, skipped
    summary: str = ""  # the table's figures column
    budget_s: float = 0.0
    seconds: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None  # why the part was skipped
    error: str | None = None
    traceback: list[str] | None = None

    def check(self, name: str, ok: bool | None, detail: str = "") -> bool:
        self.checks.append({"check": name, "ok": ok if ok is None else bool(ok), "detail": detail})
        return bool(ok)

    def skip_check(self, name: str, why: str) -> None:
        self.check(name, None, why)


@dataclass
class Context:
    device: torch.device
    quick: bool
    deadline: float  # time.monotonic() by which the whole run ends
    part_end: float = 0.0  # time.monotonic() by which the current part must end

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def left(self) -> float:
        return self.part_end - time.monotonic()


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`PartTimeout` in the main thread after ``seconds`` (a backstop: parts that
    loop watch :meth:`Context.left` themselves)."""
    if (not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        yield
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise PartTimeout(f"over its time budget of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def random_sources(n: int, vocab: int, *, min_len: int, max_len: int, seed: int) -> torch.Tensor:
    """(n, max_len) ids in [4, vocab), row i of a random length in [min_len, max_len], right-padded."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (n, max_len), generator=g)
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=g)
    lengths[0] = max_len  # one full row, so no column is all padding
    src[torch.arange(max_len)[None, :] >= lengths[:, None]] = PAD
    return src


# --- 1. device ----------------------------------------------------------------------------------


def part_device(ctx: Context, part: Part) -> None:
    from transformer.hardware import detect
    from transformer.precision import resolve_precision
    from transformer.training.distributed import resolve_device

    part.tolerance = "exact choices"
    machine = detect()
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    auto = resolve_device("auto")
    part.figures["resolve_device_auto"] = str(auto)
    part.check("resolve_device('auto')", auto.type == expected, f"{auto} (expected {expected})")
    part.check("detect() lists every CUDA device", len(machine.cuda) == torch.cuda.device_count(),
               f"{len(machine.cuda)} listed, torch sees {torch.cuda.device_count()}")
    model = Transformer(ModelConfig.tiny(64, dropout=0.0)).to(ctx.device)
    if ctx.cuda:
        index = ctx.device.index or 0
        gpu = next((d for d in machine.cuda if d.index == index), None)
        name = torch.cuda.get_device_name(index)
        major, minor = torch.cuda.get_device_capability(index)
        part.figures["gpu"] = None if gpu is None else asdict(gpu)
        part.figures["torch_says_bf16"] = torch.cuda.is_bf16_supported()
        if not part.check("detect() lists this GPU", gpu is not None and gpu.name == name,
                          f"{gpu} vs {name}"):
            return
        part.check("bf16 flag = compute capability >= 8.0", gpu.bf16 == (major >= 8),
                   f"bf16={gpu.bf16}, sm {major}{minor}, torch.cuda.is_bf16_supported()="
                   f"{part.figures['torch_says_bf16']}")
        train_expected, infer_expected = ("bf16", "bf16") if gpu.bf16 else ("fp16", "fp32")
        bf16 = "bf16" if gpu.bf16 else "no bf16"
        part.summary = f"{auto} {name} (sm {major}{minor}, {bf16})"
    else:
        cpu = machine.cpu
        # without native bf16 auto is fp32; with it, the probe decides between the two
        train_expected = infer_expected = "fp32" if not cpu.native_bf16 else ("fp32", "bf16")
        part.summary = f"{auto} {cpu.model} ({cpu.capability}, native bf16 {cpu.native_bf16})"
    for training, want in ((True, train_expected), (False, infer_expected)):
        choice = resolve_precision("auto", model=model, device=ctx.device, training=training)
        key = "training" if training else "decoding"
        part.figures[f"auto_precision_{key}"] = choice.to_dict()
        ok = choice.precision in want if isinstance(want, tuple) else choice.precision == want
        part.check(f"resolve_precision('auto', training={training})", ok,
                   f"{choice.describe()} (expected {want})")
        part.summary += f"; auto {key} {choice.precision}"
    part.figures["machine_summary"] = machine.summary()


# --- 2. reference -------------------------------------------------------------------------------


def gradient_pairs(ours: Transformer, ref: nn.Transformer
                   ) -> dict[str, tuple[nn.Parameter, nn.Parameter, slice]]:
    """Matching weights of the two stacks: name -> (ours, the reference's, rows of the latter)."""
    d, every = ours.config.d_model, slice(None)
    e0, e1 = ours.encoder.layers[0], ours.encoder.layers[-1]
    d0, d1 = ours.decoder.layers[0], ours.decoder.layers[-1]
    r0, r1 = ref.encoder.layers[0], ref.encoder.layers[-1]
    q0, q1 = ref.decoder.layers[0], ref.decoder.layers[-1]
    return {
        "encoder[0] W_qkv": (e0.self_attn.qkv_proj.weight, r0.self_attn.in_proj_weight, every),
        "encoder[-1] FFN W2": (e1.feed_forward.linear2.weight, r1.linear2.weight, every),
        "decoder[0] cross W_kv": (d0.cross_attn.kv_proj.weight, q0.multihead_attn.in_proj_weight,
                                  slice(d, None)),
        "decoder[0] self W_o": (d0.self_attn.out_proj.weight, q0.self_attn.out_proj.weight, every),
        "decoder[-1] FFN W1": (d1.feed_forward.linear1.weight, q1.linear1.weight, every),
        "decoder[-1] norm3": (d1.norm3.weight, q1.norm3.weight, every),
    }


def compare_reference(dims: dict[str, int], *, norm_first: bool, device: torch.device,
                      batch: int, src_len: int, tgt_len: int, vocab: int = 96) -> dict[str, float]:
    """Max abs difference of logits (evaluation mode, non-pad positions) and max relative
    difference of weight gradients (training mode, dropout 0) between ours and torch's."""
    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, dropout=0.0,
                      norm_first=norm_first, max_len=max(src_len, tgt_len), **dims)
    ours = Transformer(cfg)
    with warnings.catch_warnings():  # torch: nested tensors are off for pre-LN encoders
        warnings.simplefilter("ignore")
        ref = nn.Transformer(d_model=cfg.d_model, nhead=cfg.num_heads,
                             num_encoder_layers=cfg.num_encoder_layers,
                             num_decoder_layers=cfg.num_decoder_layers, dim_feedforward=cfg.d_ff,
                             dropout=0.0, batch_first=True, norm_first=norm_first)
    if not norm_first:  # the paper's post-LN stacks have no final norm
        ref.encoder.norm = None
        ref.decoder.norm = None
    copy_weights(ours, ref)
    ours, ref = ours.to(device), ref.to(device)
    src = random_sources(batch, vocab, min_len=2, max_len=src_len, seed=1).to(device)
    tgt = random_sources(batch, vocab, min_len=1, max_len=tgt_len, seed=2).to(device)
    t = tgt.size(1)
    masks = dict(src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt == PAD,
                 memory_key_padding_mask=src == PAD,
                 tgt_mask=torch.triu(torch.ones(t, t, dtype=torch.bool, device=device), 1))
    keep = tgt != PAD  # padding positions may differ (torch's fast path zeroes them)

    def theirs() -> torch.Tensor:
        return ours.output_projection(ref(ours.src_embed(src), ours.tgt_embed(tgt), **masks))

    ours.eval(), ref.eval()
    with torch.no_grad(), warnings.catch_warnings():  # torch: nested tensors are a prototype
        warnings.simplefilter("ignore")
        got, want = ours(src, tgt), theirs()
    diff = (got[keep] - want[keep]).abs()
    forward = diff.max().item()
    # allclose(atol=rtol=tol) holds exactly when this is <= tol
    allclose_tol = (diff / (1 + want[keep].abs())).max().item()
    # gradients: the embeddings and output projection are shared, so one backward at a time
    ours.train(), ref.train()
    weights = torch.randn(got.shape, generator=torch.Generator().manual_seed(3)).to(device)
    grads: dict[str, torch.Tensor] = {}
    ours.zero_grad(set_to_none=True)
    (ours(src, tgt)[keep] * weights[keep]).sum().backward()
    for name, (mine, _, _) in gradient_pairs(ours, ref).items():
        grads[name] = mine.grad.detach().clone()
    ours.zero_grad(set_to_none=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (theirs()[keep] * weights[keep]).sum().backward()
    rel = {}
    for name, (_, other, rows) in gradient_pairs(ours, ref).items():
        want = other.grad[rows]
        rel[name] = ((grads[name] - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
    return {"logits_max_abs_diff": forward, "logits_allclose_tol": allclose_tol,
            "grad_max_rel_diff": max(rel.values()), "grad_rel_diff": rel}


def part_reference(ctx: Context, part: Part) -> None:
    configs = [("d32 h4 2+3 d_ff48", dict(d_model=32, num_heads=4, num_encoder_layers=2,
                                          num_decoder_layers=3, d_ff=48), 1e-5, (4, 9, 7))]
    if not ctx.quick:
        configs.append(("d512 h8 2+2 d_ff2048", dict(d_model=512, num_heads=8,
                                                     num_encoder_layers=2, num_decoder_layers=2,
                                                     d_ff=2048), 1e-4, (8, 33, 29)))
    grad_tol = 1e-4
    part.tolerance = ("fp32, TF32 off: logits allclose atol=rtol="
                      + ", ".join(f"{tol:g} ({label.split()[0]})" for label, _, tol, _ in configs)
                      + f"; weight grads max rel diff <= {grad_tol:g}")
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    worst_fwd = worst_grad = 0.0
    try:
        for label, dims, tol, (b, s, t) in configs:
            for norm_first in (False, True):
                name = f"{label} {'pre-LN' if norm_first else 'post-LN'}"
                r = compare_reference(dims, norm_first=norm_first, device=ctx.device, batch=b,
                                      src_len=s, tgt_len=t)
                part.figures[name] = r
                part.check(f"{name}: logits", r["logits_allclose_tol"] <= tol,
                           f"max abs diff {r['logits_max_abs_diff']:.2e}, allclose at "
                           f"{r['logits_allclose_tol']:.1e}")
                part.check(f"{name}: weight gradients", r["grad_max_rel_diff"] <= grad_tol,
                           f"max rel diff {r['grad_max_rel_diff']:.2e}")
                worst_fwd = max(worst_fwd, r["logits_max_abs_diff"])
                worst_grad = max(worst_grad, r["grad_max_rel_diff"])
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
    part.summary = (f"{len(part.checks) // 2} models (post-LN, pre-LN): logits max abs diff "
                    f"{worst_fwd:.1e}, grads max rel diff {worst_grad:.1e}")


# --- 3. training --------------------------------------------------------------------------------


def copy_batches(n: int, rows: int, vocab: int, *, min_len: int, max_len: int) -> list[Any]:
    """A copy task: ``n`` batches of ``rows`` random sentences; the target is the source."""
    from transformer.data.batch_types import Batch

    out = []
    for i in range(n):
        src = random_sources(rows, vocab, min_len=min_len, max_len=max_len, seed=100 + i)
        lengths = (src != PAD).sum(1)
        tgt_in = torch.full((rows, max_len + 1), PAD)
        tgt_out = torch.full((rows, max_len + 1), PAD)
        for r in range(rows):
            ids = src[r, : lengths[r]]
            tgt_in[r, : lengths[r] + 1] = torch.cat([torch.tensor([BOS]), ids])
            tgt_out[r, : lengths[r] + 1] = torch.cat([ids, torch.tensor([EOS])])
        out.append(Batch(src, tgt_in, tgt_out, int(lengths.sum()), int((tgt_out != PAD).sum())))
    return out


class FixedBatches:
    """The same batches in the same order every epoch."""

    def __init__(self, batches: list[Any]) -> None:
        self.batches = batches

    def for_epoch(self, epoch: int) -> list[Any]:
        return self.batches


def train_losses(cfg: ModelConfig, init: dict[str, torch.Tensor], batches: list[Any], *,
                 precision: str, steps: int, device: torch.device, peak_lr: float,
                 warmup: int) -> dict[str, Any]:
    """Train a copy of ``init`` through the project's Trainer; the loss and scale of every step."""
    from transformer.training.optimizer import build_optimizer
    from transformer.training.schedule import LRSchedule, build_scheduler
    from transformer.training.trainer import TrainConfig, Trainer
    from transformer.training.translation_task import TranslationTask

    class RecordingTrainer(Trainer):
        records: list[dict[str, Any]]

        def write_metrics(self, record: dict[str, Any]) -> None:  # no run_dir: keep in memory
            if record.get("kind") == "train" and self.scaler is not None:
                record = {**record, "scale": float(self.scaler.get_scale())}
            self.records.append(record)

    model = Transformer(cfg)
    model.load_state_dict(init)
    model.to(device)
    optimizer = build_optimizer(model)
    scheduler = build_scheduler(optimizer, schedule=LRSchedule(kind="inverse_sqrt", warmup=warmup,
                                                               peak_lr=peak_lr))
    trainer = RecordingTrainer(model=model, task=TranslationTask(), optimizer=optimizer,
                               scheduler=scheduler, train_data=FixedBatches(batches),
                               config=TrainConfig(max_steps=steps, log_every=1, eval_every=0,
                                                  precision=precision, clip_norm=1.0),
                               device=device)
    trainer.records = []
    initial_scale = float(trainer.scaler.get_scale()) if trainer.scaler is not None else None
    start = time.perf_counter()
    result = trainer.fit()
    sync(device)
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


def part_training(ctx: Context, part: Part) -> None:
    if ctx.quick:
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
    max_early_skips = 5
    part.tolerance = (f"bf16/fp16 loss within {LOSS_RTOL:.0%} of fp32 at every step; final loss "
                      f"< 0.8x first; scaler skips only in the first {max_early_skips} steps")
    torch.manual_seed(0)
    init = {k: v.clone() for k, v in Transformer(cfg).state_dict().items()}
    batches = copy_batches(n_batches, rows, cfg.src_vocab_size, min_len=lengths[0],
                           max_len=lengths[1])
    part.figures.update(config=cfg.to_dict(), steps=steps, batches=n_batches, rows=rows,
                        peak_lr=peak_lr, warmup=warmup, dropout=0.0,
                        note="dropout 0 so the runs differ by arithmetic only")
    runs: dict[str, dict[str, Any]] = {}
    for precision in ("fp32", "bf16", "fp16"):
        if precision == "fp16" and not ctx.cuda:
            part.skip_check("fp16 autocast + GradScaler", "fp16 needs CUDA")
            continue
        runs[precision] = run = train_losses(cfg, init, batches, precision=precision, steps=steps,
                                             device=ctx.device, peak_lr=peak_lr, warmup=warmup)
        part.figures[precision] = run
        losses = run["losses"]
        part.check(f"{precision}: {steps} steps, every loss finite",
                   len(losses) == steps and all(math.isfinite(x) for x in losses),
                   f"{len(losses)} losses, first {losses[0]:.4f}, last {losses[-1]:.4f}")
        part.check(f"{precision}: loss decreases", losses[-1] < 0.8 * losses[0],
                   f"{losses[0]:.4f} -> {losses[-1]:.4f} ({losses[-1] / losses[0]:.2f}x)")
        if precision == "fp16":
            early = all(s <= max_early_skips for s in run["skipped_by_scaler"])
            part.check("fp16: scaler skips only early steps",
                       early and len(run["skipped_by_scaler"]) <= max_early_skips,
                       f"skipped steps {run['skipped_by_scaler']}, final scale {run['final_scale']}")
        if precision != "fp32" and "fp32" in runs:
            ref = runs["fp32"]["losses"]
            skipped = run["skipped_by_scaler"]
            # a skipped update leaves the weights as they were: compare with fp32's loss that
            # many updates earlier
            rel = []
            for i, x in enumerate(losses):
                j = i - sum(1 for s in skipped if s <= i)
                rel.append(abs(x - ref[j]) / abs(ref[j]))
            worst = max(rel)
            run["max_rel_diff_vs_fp32"] = worst
            part.check(f"{precision}: loss vs fp32 at every step", worst <= LOSS_RTOL,
                       f"max rel diff {worst:.2%} (step {rel.index(worst) + 1})"
                       + (f", aligned past {len(skipped)} skipped" if skipped else ""))
    part.summary = "; ".join(
        f"{p} {r['losses'][0]:.3f}->{r['losses'][-1]:.3f}"
        + (f" (max {r['max_rel_diff_vs_fp32']:.1%} off)" if "max_rel_diff_vs_fp32" in r else "")
        + (f" skips {r['skipped_by_scaler']}" if p == "fp16" else "")
        for p, r in runs.items())


# --- 4. decoding --------------------------------------------------------------------------------


def first_difference_gap(model: Transformer, src_row: torch.Tensor, a: list[int], b: list[int]
                         ) -> tuple[int, float]:
    """Where two greedy outputs first differ (past its end a row's token is EOS) and the gap
    between the two tokens' log-probabilities there, under ``model`` (CPU, fp32)."""
    longest = max(len(a), len(b))
    p = next(i for i in range(longest + 1)
             if (a[i] if i < len(a) else EOS) != (b[i] if i < len(b) else EOS))
    ta, tb = (a[p] if p < len(a) else EOS), (b[p] if p < len(b) else EOS)
    prefix = torch.tensor([[BOS, *a[:p]]])
    with torch.no_grad():
        scores = model(src_row[None], prefix)[0, -1].float().log_softmax(-1)
    return p, abs(scores[ta] - scores[tb]).item()


def compare_greedy(a: list[list[int]], b: list[list[int]], model: Transformer,
                   src: torch.Tensor) -> dict[str, Any]:
    gaps = []
    for row, (x, y) in enumerate(zip(a, b, strict=True)):
        if x != y:
            pos, gap = first_difference_gap(model, src[row], x, y)
            gaps.append({"row": row, "position": pos, "logprob_gap": gap})
    return {"identical_share": 1 - len(gaps) / len(a), "differing": gaps,
            "unexplained": sum(g["logprob_gap"] > TIE_LOGPROB for g in gaps)}


def compare_beam(a: list[list[tuple[list[int], float]]], b: list[list[tuple[list[int], float]]]
                 ) -> dict[str, Any]:
    def best(hyps: list[tuple[list[int], float]]) -> tuple[list[int], float]:
        return hyps[0] if hyps else ([], -math.inf)

    diffs = []
    for row, (x, y) in enumerate(zip(a, b, strict=True)):
        (ids_x, score_x), (ids_y, score_y) = best(x), best(y)
        if ids_x != ids_y:
            gap = abs(score_x - score_y) if math.isfinite(score_x - score_y) else math.inf
            diffs.append({"row": row, "score_gap": gap})
    return {"identical_share": 1 - len(diffs) / len(a), "differing": diffs,
            "unexplained": sum(d["score_gap"] > TIE_SCORE for d in diffs)}


def part_decoding(ctx: Context, part: Part) -> None:
    from transformer.decoding import beam_search, greedy_decode

    if ctx.quick:
        cfg = ModelConfig.tiny(64, dropout=0.0, max_len=32)
        max_len, src_len = 10, 8
    else:
        cfg = ModelConfig.small(1000, dropout=0.0, max_len=64)
        max_len, src_len = 24, 20
    part.tolerance = (f"token for token; a differing row passes only as a floating-point tie "
                      f"(greedy: log-prob gap <= {TIE_LOGPROB:g} where rows part; beam: score "
                      f"gap <= {TIE_SCORE:g}), reported")
    torch.manual_seed(0)
    cpu_model = Transformer(cfg).eval()
    dev_model = copy.deepcopy(cpu_model).to(ctx.device).eval()
    src = random_sources(16, cfg.src_vocab_size, min_len=4, max_len=src_len, seed=7)
    src_dev = src.to(ctx.device)
    common = dict(bos_id=BOS, eos_id=EOS, max_len=max_len)
    beam = dict(beam_size=4, length_penalty=0.6, nbest=1)
    # on a CPU "the device" is the CPU too: its run multiplies by plain weights, the reference
    # by the packed ones, so the comparison still crosses two code paths
    on_dev = dict(pack_weights=False) if not ctx.cuda else {}
    part.figures.update(config=cfg.to_dict(), sources=16, max_len=max_len, beam_size=4,
                        reference="CPU, fp32, cached, packed weights",
                        device_run=f"{ctx.device}, fp32" + (", unpacked" if on_dev else ""))
    timings = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        out = fn()
        timings[name] = round(time.perf_counter() - start, 3)
        return out

    greedy_cpu = timed("greedy_cpu", lambda: greedy_decode(cpu_model, src, **common))
    greedy_dev = timed("greedy_device", lambda: greedy_decode(dev_model, src_dev, **common, **on_dev))
    beam_cpu = timed("beam_cpu", lambda: beam_search(cpu_model, src, **common, **beam))
    beam_dev = timed("beam_device", lambda: beam_search(dev_model, src_dev, **common, **beam, **on_dev))
    greedy_unc = timed("greedy_device_uncached",
                       lambda: greedy_decode(dev_model, src_dev, **common, use_cache=False))
    beam_unc = timed("beam_device_uncached",
                     lambda: beam_search(dev_model, src_dev, **common, **beam, use_cache=False))
    comparisons = {
        "greedy device == CPU": compare_greedy(greedy_cpu, greedy_dev, cpu_model, src),
        "beam-4 device == CPU": compare_beam(beam_cpu, beam_dev),
        "greedy cached == uncached (device)": compare_greedy(greedy_dev, greedy_unc, cpu_model, src),
        "beam-4 cached == uncached (device)": compare_beam(beam_dev, beam_unc),
    }
    for name, c in comparisons.items():
        part.figures[name] = c
        ties = len(c["differing"]) - c["unexplained"]
        part.check(name, c["unexplained"] == 0,
                   f"{c['identical_share']:.0%} of rows identical, {ties} tie(s), "
                   f"{c['unexplained']} unexplained")
    tokens = sum(len(r) for r in greedy_cpu)
    part.figures["greedy_tokens"] = tokens
    part.check("outputs are not empty", tokens > 0, f"{tokens} greedy tokens")
    # bf16: the weights in bf16 on the device, decoded as they are
    low = copy.deepcopy(cpu_model).to(ctx.device, dtype=torch.bfloat16).eval()
    greedy_low = timed("greedy_device_bf16", lambda: greedy_decode(low, src_dev, **common))
    beam_low = timed("beam_device_bf16", lambda: beam_search(low, src_dev, **common, **beam))
    valid = (len(greedy_low) == len(beam_low) == 16
             and all(0 < t < cfg.tgt_vocab_size and t != PAD for r in greedy_low for t in r)
             and all(len(r) <= max_len for r in greedy_low)
             and all(r and math.isfinite(r[0][1]) for r in beam_low))
    agree = sum(x == y for x, y in zip(greedy_low, greedy_dev, strict=True)) / 16
    agree_beam = sum(bool(x and y) and x[0][0] == y[0][0]
                     for x, y in zip(beam_low, beam_dev, strict=True)) / 16
    part.figures.update(bf16_greedy_rows_equal_fp32=agree, bf16_beam_rows_equal_fp32=agree_beam)
    part.check("bf16 greedy and beam-4 run", valid,
               f"rows equal to fp32: greedy {agree:.0%}, beam {agree_beam:.0%} (not a tolerance)")
    part.figures["seconds"] = timings
    shares = [f"{c['identical_share']:.0%}" for c in comparisons.values()]
    part.summary = (f"identical rows: greedy dev/CPU {shares[0]}, beam {shares[1]}; "
                    f"cached/uncached {shares[2]}, {shares[3]}; bf16 greedy = fp32 {agree:.0%}")


# --- 5. memory ----------------------------------------------------------------------------------


def part_memory(ctx: Context, part: Part) -> None:
    from transformer.memory import estimate_training_memory, format_bytes, measure_training_peak

    # (preset, vocabulary, batch, length, precision, encoder_only)
    if ctx.quick:
        rows = [("tiny", 1000, b, 20, p, False) for p in ("fp32", "bf16") for b in (4, 8)]
        rows.append(("tiny", 1000, 8, 24, "fp32", True))
    else:
        rows = [("base", 8000, b, 48, p, False) for p in ("fp32", "bf16") for b in (16, 64, 128)]
        rows += [("base", 8000, 64, 48, "fp16", False), ("small", 8000, 64, 128, "bf16", True)]
    part.tolerance = f"estimate / measured within {MEMORY_RTOL:.0%}"
    method = ("torch.cuda.max_memory_allocated of the second step (peaks reset per phase), less "
              "what was allocated before" if ctx.cuda else
              "live tensor storage (TorchDispatchMode): the project's CPU counterpart")
    part.figures["method"] = method
    table = part.figures["rows"] = []
    for preset, vocab, batch, length, precision, encoder_only in rows:
        if ctx.left() < 5:
            part.skip_check(f"{preset} b{batch} {precision}", "part's time budget spent")
            continue
        cfg = ModelConfig.preset(preset, vocab)
        shape = dict(batch_size=batch, src_len=length, tgt_len=None if encoder_only else length,
                     precision=precision, encoder_only=encoder_only,
                     num_labels=28 if encoder_only else 2)
        name = (f"{preset} {'classifier' if encoder_only else 'translation'} b{batch} "
                f"len{length} {precision}")
        estimate = estimate_training_memory(cfg, device=ctx.device.type, **shape)
        baseline = 0
        if ctx.cuda:
            gc.collect()
            torch.cuda.empty_cache()
            for dtype in (torch.float32, torch.bfloat16, torch.float16):  # cuBLAS(Lt) workspaces
                x = torch.ones(64, 64, device=ctx.device, dtype=dtype)
                x @ x
                nn.functional.linear(x, x, x[0])
            del x
            sync(ctx.device)
            baseline = torch.cuda.memory_allocated(ctx.device)
            torch.cuda.reset_peak_memory_stats(ctx.device)
        measured = measure_training_peak(cfg, device=str(ctx.device), **shape)
        net = measured.peak_bytes - baseline
        ratio = estimate.peak_bytes / max(net, 1)
        table.append({"name": name, "estimate_bytes": estimate.peak_bytes,
                      "measured_bytes": measured.peak_bytes, "baseline_bytes": baseline,
                      "ratio": round(ratio, 4), "estimate_phase": estimate.peak_phase,
                      "measured_phase_peaks": measured.phase_peaks})
        part.check(name, abs(ratio - 1) <= MEMORY_RTOL,
                   f"estimate {format_bytes(estimate.peak_bytes)}, measured {format_bytes(net)}"
                   f"{f' (+{format_bytes(baseline)} before)' if baseline else ''}, "
                   f"ratio {ratio:.3f}")
    if table:
        ratios = [r["ratio"] for r in table]
        part.summary = (f"{len(table)} rows, estimate/measured {min(ratios):.3f}-{max(ratios):.3f}"
                        + ("" if ctx.cuda else " (CPU: live tensor bytes)"))


# --- 6. throughput ------------------------------------------------------------------------------


def matmul_peak(device: torch.device, dtype: torch.dtype, size: int, repeats: int = 5) -> float:
    """Measured GFLOP/s of a square matmul on ``device``: the ceiling for MFU."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    best = math.inf
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        for _ in range(4):
            a @ b
        sync(device)
        best = min(best, (time.perf_counter() - start) / 4)
    return 2 * size**3 / best / 1e9


def part_throughput(ctx: Context, part: Part) -> None:
    # train_throughput.py beside this script: the reference model, batches, FLOPs and losses
    from train_throughput import TorchReference, make_batches, project_loss, torch_loss, train_flops
    from transformer.training.optimizer import build_optimizer

    if ctx.quick:
        cfg = ModelConfig(src_vocab_size=500, tgt_vocab_size=500, d_model=64, num_heads=4,
                          num_encoder_layers=1, num_decoder_layers=1, d_ff=256, dropout=0.1,
                          max_len=64)
        batch, length, n_batches, peak_size, max_rounds = 8, 12, 2, 256, 2
    else:
        cfg = ModelConfig.base(32000)  # the paper's base model, a paper-sized vocabulary
        batch, length, n_batches, peak_size, max_rounds = 128, 32, 8, 8192, 40
    part.tolerance = "a measurement: no pass/fail on speed; every loss finite"
    precisions = ("bf16", "fp32")
    torch.manual_seed(0)
    models: dict[str, nn.Module] = {"ours": Transformer(cfg),
                                    "torch": TorchReference(Transformer(cfg)),
                                    "ours+opts": Transformer(cfg)}
    for m in models.values():
        m.to(ctx.device).train()
    optimizers = {
        name: (build_optimizer(m, lr=1e-4) if name == "ours+opts"  # the trainer's fused Adam
               else torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9))
        for name, m in models.items()}
    losses = {"ours": torch_loss, "torch": torch_loss, "ours+opts": project_loss}
    batches = [tuple(x.to(ctx.device) for x in b)
               for b in make_batches(cfg, n_batches, batch, length, length)]
    tokens = sum(int((s != PAD).sum() + (t != PAD).sum()) for s, _, t in batches)
    flops = train_flops(cfg, batch, length, length) * len(batches)
    part.figures.update(config=cfg.to_dict(), batch=batch, src_len=length, tgt_len=length,
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
        with autocast(ctx.device, precision):
            logits = model(src, tgt_in)
        loss = losses[name](logits, tgt_out)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        last_loss[name] = loss.detach()

    results = part.figures["rows"] = []
    summary = []
    for k, precision in enumerate(precisions):
        # at most ROUND_SECONDS of timed rounds per precision, and never past the part's budget
        # (bf16, the run's default on a GPU, first; the time left split between the two)
        share = 0.5 if k == 0 else 0.9
        stop = time.monotonic() + min(ROUND_SECONDS, share * max(ctx.left() - 10, 0))
        if ctx.left() < 15:
            part.skip_check(f"{precision} throughput", "part's time budget spent")
            continue
        for name in models:  # warm-up: kernels, allocator, cuBLAS heuristics
            for b in batches[:2]:
                step(name, precision, *b)
        sync(ctx.device)
        times: dict[str, list[float]] = {name: [] for name in models}
        rounds = 0
        while rounds < max_rounds and (rounds < 2 or time.monotonic() < stop):
            order = list(models) if rounds % 2 == 0 else list(reversed(models))
            for name in order:
                sync(ctx.device)
                start = time.perf_counter()
                for b in batches:
                    step(name, precision, *b)
                sync(ctx.device)
                times[name].append(time.perf_counter() - start)
            rounds += 1
        finite = all(math.isfinite(v.item()) for v in last_loss.values())
        part.check(f"{precision}: every contender's loss finite", finite,
                   ", ".join(f"{n} {v.item():.3f}" for n, v in last_loss.items()))
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        peak = matmul_peak(ctx.device, dtype, peak_size)
        row: dict[str, Any] = {"precision": precision, "rounds": rounds,
                               "matmul_peak_gflops": round(peak, 1)}
        for name, ts in times.items():
            best, median = min(ts), sorted(ts)[len(ts) // 2]
            row[f"{name}_tokens_per_s"] = round(tokens / best)
            row[f"{name}_tokens_per_s_median"] = round(tokens / median)
            row[f"{name}_ms_per_step"] = round(best / len(batches) * 1e3, 2)
            row[f"{name}_mfu"] = round(flops / best / 1e9 / peak, 3)
        for name in ("ours", "ours+opts"):
            row[f"{name}_vs_torch"] = round(row[f"{name}_tokens_per_s"] / row["torch_tokens_per_s"], 3)
        results.append(row)
        summary.append(f"{precision} ours {row['ours_tokens_per_s']:,} tok/s = "
                       f"{row['ours_vs_torch']:.2f}x torch (+opts {row['ours+opts_vs_torch']:.2f}x), "
                       f"MFU {row['ours_mfu']:.0%}")
    part.summary = "; ".join(summary)


# --- 7. what one GPU cannot check ---------------------------------------------------------------

NOT_CHECKED = ("multi-GPU NCCL DDP (torchrun --nproc-per-node 2 -m transformer train ...) needs two "
               "devices: not checked here and not simulated")


def part_ddp(ctx: Context, part: Part) -> None:
    part.tolerance = "-"
    part.figures["cuda_devices"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
    raise Skip(NOT_CHECKED)


# --- the run ------------------------------------------------------------------------------------

# name, function, time budget on a GPU (seconds; the alarm that stops a part that hangs)
PARTS: list[tuple[str, Callable[[Context, Part], None], float]] = [
    ("device", part_device, 30),
    ("reference", part_reference, 45),
    ("training", part_training, 60),
    ("decoding", part_decoding, 60),
    ("memory", part_memory, 60),
    ("throughput", part_throughput, 120),
    ("ddp", part_ddp, 5),
]


def run_part(ctx: Context, name: str, fn: Callable[[Context, Part], None], budget: float) -> Part:
    part = Part(name, budget_s=budget)
    left = ctx.deadline - time.monotonic()
    if left < 10:
        part.result = "skipped"
        part.reason = f"out of time: {left:.0f} s of the whole run's budget left"
        return part
    allowed = min(budget, left)
    ctx.part_end = time.monotonic() + allowed
    start = time.perf_counter()
    try:
        with time_limit(allowed):
            fn(ctx, part)
            sync(ctx.device)
    except Skip as e:
        part.result, part.reason = "skipped", str(e)
    except Exception as e:  # a part's failure is recorded; the other parts still run
        part.result = "FAIL"
        part.error = f"{type(e).__name__}: {e}"
        lines = "".join(traceback.format_exception(type(e), e, e.__traceback__)).splitlines()
        part.traceback = lines[-16:]
    finally:
        part.seconds = round(time.perf_counter() - start, 2)
        gc.collect()
        if ctx.cuda:
            with contextlib.suppress(Exception):  # a broken CUDA context is reported by the part
                torch.cuda.empty_cache()
    if part.result == "ok" and any(c["ok"] is False for c in part.checks):
        part.result = "FAIL"
    return part


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


def print_table(parts: list[Part]) -> None:
    print(f"{'part':<11} {'result':<8} {'figures':<80} tolerance")
    for p in parts:
        figures = p.summary or p.reason or p.error or ""
        if p.result == "skipped" and p.reason and p.summary:
            figures = f"{p.summary} ({p.reason})"
        left = textwrap.wrap(figures, 80) or [""]
        right = textwrap.wrap(p.tolerance, 48) or [""]
        for i in range(max(len(left), len(right))):
            a = left[i] if i < len(left) else ""
            b = right[i] if i < len(right) else ""
            head = f"{p.name:<11} {p.result:<8}" if i == 0 else " " * 20
            print(f"{head} {a:<80} {b}".rstrip())
        for c in p.checks:
            if c["ok"] is False:
                print(f"{'':<11} {'':<8}   FAIL {c['check']}: {c['detail']}")
            elif c["ok"] is None:
                print(f"{'':<11} {'':<8}   skipped {c['check']}: {c['detail']}")
        if p.result == "FAIL" and p.error:
            print(f"{'':<11} {'':<8}   {p.error}")
            for line in (p.traceback or [])[-4:]:
                print(f"{'':<11} {'':<8}   | {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="auto (default) and cuda need a CUDA GPU; cpu runs the same checks "
                             "on the CPU (fp16 skipped)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    parser.add_argument("--parts", default=",".join(name for name, _, _ in PARTS),
                        help="comma-separated parts to run (default: all)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file (default benchmarks/results/gpu_check.json; with --quick "
                             "gpu_check_quick.json in the temp directory)")
    args = parser.parse_args(argv)
    began = time.monotonic()
    wanted = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(wanted) - {name for name, _, _ in PARTS})
    if unknown:
        print(f"gpu_check: unknown part(s) {', '.join(unknown)}; choose from "
              f"{', '.join(name for name, _, _ in PARTS)}", file=sys.stderr)
        return 2
    if args.device != "cpu" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (torch " + torch.__version__ + "); run on a GPU "
              "machine, or pass --device cpu [--quick] to check the CPU paths", file=sys.stderr)
        return 2
    device = torch.device("cpu") if args.device == "cpu" else torch.device("cuda", 0)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    elif hasattr(os, "sched_getaffinity"):  # the cores this process may use (taskset)
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    quick_out = Path(tempfile.gettempdir()) / "gpu_check_quick.json"
    out = args.out or (quick_out if args.quick else RESULTS)
    ctx = Context(device=device, quick=args.quick, deadline=began + TOTAL_BUDGET_S)
    env = environment(device)
    print(f"gpu_check on {env['gpu'] or 'cpu'} (torch {env['torch']}, CUDA {env['cuda']}); "
          f"{env.get('machine_summary', '')}", flush=True)
    parts = []
    for name, fn, budget in PARTS:
        if name not in wanted:
            continue
        part = run_part(ctx, name, fn, budget)
        parts.append(part)
        print(f"  {name}: {part.result} ({part.seconds:.1f} s)", flush=True)
    total = round(time.monotonic() - began, 1)
    print()
    print_table(parts)
    print(f"\nnot checked on one GPU: {NOT_CHECKED}")
    failed = [p.name for p in parts if p.result == "FAIL"]
    report = {"environment": env, "args": {k: str(v) for k, v in vars(args).items()},
              "quick": args.quick, "seconds": total, "failed": failed,
              "not_checked": [NOT_CHECKED], "parts": [asdict(p) for p in parts]}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(out)
    print(f"{len(parts) - len(failed)} of {len(parts)} parts without failure in {total:.0f} s; "
          f"wrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
