"""Training throughput: our Transformer against torch.nn.Transformer, side by side in one run.

Both models get the same embeddings (ours: scaled token embedding + sinusoidal positions), the same
output projection, dimensions, batches, loss (F.cross_entropy), optimizer (torch.optim.Adam) and
precision; only the encoder/decoder stacks differ. A third contender, ``ours+opts``, is our model
with what the project's trainer adds: the label-smoothed loss with its hand-written gradient and
the fused Adam kernel; ``--compile`` adds ``ours+opts+compile`` (torch.compile of the model).
Steps alternate between the contenders in rounds, so machine noise hits all alike; the best round
counts. Model FLOPs utilisation (MFU) is measured against a matmul peak taken in the same run.

    .venv/bin/python benchmarks/train_throughput.py            # d_model 256 and 512, fp32 and bf16
    .venv/bin/python benchmarks/train_throughput.py --quick    # a smoke run
    .venv/bin/python benchmarks/train_throughput.py --compile  # adds torch.compile'd ours+opts

Prints a table and writes benchmarks/results/train_throughput.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from machine import cpu_name, describe  # benchmarks/machine.py
from transformer import ModelConfig, Transformer
from transformer.training.loss import label_smoothed_cross_entropy
from transformer.training.optimizer import build_optimizer

PAD = 0


class TorchReference(nn.Module):
    """torch.nn.Transformer between our embeddings and output projection (post-LN, no final norms,
    as the paper and our model)."""

    def __init__(self, ours: Transformer) -> None:
        super().__init__()
        cfg = ours.config
        self.src_embed, self.tgt_embed = ours.src_embed, ours.tgt_embed
        self.output_projection = ours.output_projection
        self.stacks = nn.Transformer(
            d_model=cfg.d_model, nhead=cfg.num_heads, num_encoder_layers=cfg.num_encoder_layers,
            num_decoder_layers=cfg.num_decoder_layers, dim_feedforward=cfg.d_ff, dropout=cfg.dropout,
            batch_first=True,
        )
        self.stacks.encoder.norm = None
        self.stacks.decoder.norm = None

    def forward(self, src, tgt_in):
        t = tgt_in.size(1)
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=src.device), diagonal=1)
        hidden = self.stacks(
            self.src_embed(src), self.tgt_embed(tgt_in), tgt_mask=causal,
            src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt_in == PAD,
            memory_key_padding_mask=src == PAD,
        )
        return self.output_projection(hidden)


def matmul_peak(dtype: torch.dtype, size: int = 2048, repeats: int = 10) -> float:
    """Measured GFLOP/s of a square matmul in ``dtype``: the ceiling for MFU."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    for _ in range(2):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def train_flops(cfg: ModelConfig, batch: int, src_len: int, tgt_len: int) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3x forward)."""
    d, f = cfg.d_model, cfg.d_ff
    s_tok, t_tok = batch * src_len, batch * tgt_len
    enc = cfg.num_encoder_layers * (s_tok * (4 * d * d + 2 * d * f) + batch * 2 * src_len**2 * d)
    dec = cfg.num_decoder_layers * (
        t_tok * (4 * d * d + 2 * d * d + 2 * d * f)  # self-attn proj, cross Q/O, FFN
        + s_tok * 2 * d * d  # cross K/V of the memory
        + batch * 2 * (tgt_len**2 + tgt_len * src_len) * d  # scores and weighted sums
    )
    out = t_tok * d * cfg.tgt_vocab_size
    return 3 * 2 * (enc + dec + out)


def make_batches(cfg: ModelConfig, n: int, batch: int, src_len: int, tgt_len: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        src = torch.randint(4, cfg.src_vocab_size, (batch, src_len), generator=g)
        tgt = torch.randint(4, cfg.tgt_vocab_size, (batch, tgt_len + 1), generator=g)
        # a little right padding, as length-bucketed batches have
        for row in range(0, batch, 4):
            src[row, -2:] = PAD
            tgt[row, -2:] = PAD
        out.append((src, tgt[:, :-1], tgt[:, 1:]))
    return out


def torch_loss(logits, tgt_out):
    return F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=PAD,
                           label_smoothing=0.1)


def project_loss(logits, tgt_out):
    return label_smoothed_cross_entropy(logits, tgt_out, smoothing=0.1, reduction="mean")


def step_fn(model: nn.Module, optimizer, precision: str, loss_fn):
    autocast = (
        torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
    )

    def step(src, tgt_in, tgt_out):
        with autocast:
            logits = model(src, tgt_in)
        loss = loss_fn(logits, tgt_out)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def measure(args: argparse.Namespace, d_model: int, precision: str) -> dict:
    heads = max(4, d_model // 64)
    cfg = ModelConfig(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, d_model=d_model,
                      num_heads=heads, num_encoder_layers=args.layers, num_decoder_layers=args.layers,
                      d_ff=4 * d_model, dropout=0.1, max_len=256)
    torch.manual_seed(0)
    ours = Transformer(cfg)
    ref = TorchReference(Transformer(cfg))
    plain = {"ours": ours, "torch": ref}
    project = {"ours+opts": Transformer(cfg)}
    if args.compile:
        project["ours+opts+compile"] = torch.compile(Transformer(cfg), dynamic=False)
    steps = {}
    for name, model in plain.items():
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        steps[name] = step_fn(model, opt, precision, torch_loss)
    for name, model in project.items():
        model.train()
        opt = build_optimizer(model, lr=1e-4)  # fused Adam, the trainer's
        steps[name] = step_fn(model, opt, precision, project_loss)
    batches = make_batches(cfg, args.steps, args.batch, args.src_len, args.tgt_len)
    tokens = sum(int((s != PAD).sum() + (t != PAD).sum()) for s, _, t in batches)
    for step in steps.values():  # warm-up (and compilation)
        for b in batches[:2]:
            step(*b)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for b in batches:
                step(*b)
            times[name].append(time.perf_counter() - start)
    peak = matmul_peak(torch.bfloat16 if precision == "bf16" else torch.float32)
    flops = train_flops(cfg, args.batch, args.src_len, args.tgt_len) * len(batches)
    row = {"d_model": d_model, "precision": precision, "matmul_peak_gflops": round(peak, 1)}
    for name, ts in times.items():
        t = min(ts)  # best round: the least disturbed by other processes
        row[f"{name}_tokens_per_s"] = round(tokens / t)
        row[f"{name}_mfu"] = round(flops / t / 1e9 / peak, 3)
    for name in times:
        if name != "torch":
            row[f"{name}_vs_torch"] = round(row[f"{name}_tokens_per_s"] / row["torch_tokens_per_s"], 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument("--tgt-len", type=int, default=24)
    parser.add_argument("--steps", type=int, default=6, help="steps per round per model")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile(ours+opts)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "train_throughput.json")
    args = parser.parse_args()
    if args.quick:
        args.d_model, args.steps, args.rounds, args.layers = [128], 2, 2, 1
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = [measure(args, d, p) for d in args.d_model for p in args.precision]
    names = [k[: -len("_tokens_per_s")] for k in rows[0] if k.endswith("_tokens_per_s")]
    header = f"{'d_model':>7} {'prec':>5} {'peak GF/s':>9} " + " ".join(
        f"{n + ' tok/s':>18} {n + ' MFU':>14}" for n in names
    ) + " " + " ".join(f"{n + '/torch':>18}" for n in names if n != "torch")
    print(header)
    for r in rows:
        print(f"{r['d_model']:>7} {r['precision']:>5} {r['matmul_peak_gflops']:>9} " + " ".join(
            f"{r[n + '_tokens_per_s']:>18} {r[n + '_mfu']:>14}" for n in names
        ) + " " + " ".join(f"{r[n + '_vs_torch']:>18}" for n in names if n != "torch"))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    meta = {"machine": cpu_name(), "hardware": describe(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "args": {k: str(v) for k, v in vars(args).items()}}
    args.output.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
