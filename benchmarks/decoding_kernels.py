"""The decoding benchmark's kernels suite (benchmarks/decoding.py ``--suite kernels``): each
product's, attention's and argmax's time by rows, the crossovers ``transformer.decoding``
dispatches on."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

KERNEL_ROWS = (1, 2, 4, 8, 16, 32, 80)


def kernels_suite(args: argparse.Namespace) -> dict:
    """Microseconds of one step's product at each row count: plain ``F.linear``, one ``addmm`` on
    the weight transposed once, oneDNN's packed
    weights and the int8 kernel, for every weight shape of the two models (the crossovers that
    ``transformer.decoding.packing`` dispatches on)."""
    from torch import nn

    from transformer.decoding import packing

    def micro(fn: Callable, x: torch.Tensor, n: int = 200) -> float:
        for _ in range(10):
            fn(x)
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for _ in range(n):
                fn(x)
            best = min(best, (time.perf_counter() - t0) / n)
        return best * 1e6

    shapes = []
    for shape in args.shapes.values():
        d, ff = shape["d_model"], shape["d_ff"]
        shapes += [(3 * d, d), (d, d), (ff, d), (d, ff), (args.vocab, d)]
    rows = []
    for out_features, in_features in dict.fromkeys(shapes):
        layer = nn.Linear(in_features, out_features)
        kernels = {"F.linear": functools.partial(F.linear, weight=layer.weight, bias=layer.bias),
                   "addmm W^T": functools.partial(packing._transposed_linear,
                                                  layer.weight.detach().t().contiguous(), layer.bias),
                   "packed": functools.partial(packing._packed_linear,
                                               torch.ops.mkldnn._reorder_linear_weight(layer.weight.detach()),
                                               layer.bias),
                   "int8": functools.partial(packing._int8_linear, packing.int8_linear_weight(layer))}
        for r in KERNEL_ROWS:
            x = torch.randn(r, 1, in_features)
            with torch.inference_mode():
                us = {name: micro(fn, x) for name, fn in kernels.items()}
            row = {"weight": f"{out_features}x{in_features}", "rows": r,
                   "us": {k: round(v, 1) for k, v in us.items()}, "fastest": min(us, key=us.get)}
            rows.append(row)
            if len(rows) == 1:
                print(f"{'weight':>10} {'rows':>4} " + " ".join(f"{k:>9}" for k in kernels) + "  fastest")
            print(f"{row['weight']:>10} {r:4d} " + " ".join(f"{v:9.1f}" for v in us.values())
                  + f"  {row['fastest']}", flush=True)
    return {"suite": "kernels", "unit": "microseconds per call", "rows": rows,
            "attention": attention_kernels(args, micro), "argmax": argmax_kernels(args, micro)}


ATTENTION_ROWS = (4, 8, 16, 24, 32, 48, 80)
ATTENTION_KEYS = (16, 32, 64, 100)


def attention_kernels(args: argparse.Namespace, micro: Callable) -> list[dict]:
    """One query a row against L keys (a cached step's self- or cross-attention): SDPA's fused
    kernel against the spelled-out matmuls (``transformer.decoding.kernels.step_attention``'s
    ``CPU_SINGLE_QUERY_ROWS``/``_KEYS`` crossover), per head dimension of the two models."""
    from transformer.model.attention import attention

    rows = []
    heads_dims = sorted({(s["heads"], s["d_model"] // s["heads"]) for s in args.shapes.values()})
    print(f"\n{'heads x Dh':>10} {'rows':>4} {'keys':>4} {'SDPA':>9} {'spelled':>9}  fastest")
    for heads, dh in heads_dims:
        for r in ATTENTION_ROWS:
            for keys in ATTENTION_KEYS:
                q = torch.randn(r, heads, 1, dh)
                k, v = torch.randn(r, heads, keys, dh), torch.randn(r, heads, keys, dh)
                kernels = {"SDPA": lambda q, k=k, v=v: attention(q, k, v)[0],
                           "spelled": lambda q, k=k, v=v: attention(q, k, v, need_weights=True)[0]}
                with torch.inference_mode():
                    us = {name: micro(fn, q) for name, fn in kernels.items()}
                row = {"heads": heads, "head_dim": dh, "rows": r, "keys": keys,
                       "us": {n: round(t, 1) for n, t in us.items()}, "fastest": min(us, key=us.get)}
                rows.append(row)
                print(f"{f'{heads}x{dh}':>10} {r:4d} {keys:4d} {us['SDPA']:9.1f} {us['spelled']:9.1f}"
                      f"  {row['fastest']}", flush=True)
    return rows


def argmax_kernels(args: argparse.Namespace, micro: Callable) -> list[dict]:
    """The best token of R rows of V scores: PyTorch's argmax against the two rounds over chunks
    of ``transformer.decoding.ranking.argmax_rows`` (its ``ARGMAX_MIN_SCORES`` crossover)."""
    from transformer.decoding.ranking import vocabulary_chunk

    chunk = vocabulary_chunk(args.vocab)
    rows = []
    if chunk is None:
        return rows
    print(f"\n{'vocab':>10} {'rows':>4} {'argmax':>9} {'chunked':>9}  fastest")
    for r in (1, 2, 3, 4, 6, 8, 16, 80):
        scores = torch.randn(r, args.vocab)

        def chunked(s: torch.Tensor, r: int = r) -> torch.Tensor:  # argmax_rows's two rounds
            chunks = s.view(r, -1, chunk)  # (R, M, chunk)
            best = chunks.amax(dim=-1).argmax(dim=-1)
            within = chunks.gather(1, best[:, None, None].expand(r, 1, chunk)).squeeze(1).argmax(-1)
            return best * chunk + within

        kernels = {"argmax": functools.partial(torch.argmax, dim=-1), "chunked": chunked}
        with torch.inference_mode():
            us = {name: micro(fn, scores) for name, fn in kernels.items()}
        row = {"vocab": args.vocab, "rows": r, "us": {n: round(t, 1) for n, t in us.items()},
               "fastest": min(us, key=us.get)}
        rows.append(row)
        print(f"{args.vocab:>10} {r:4d} {us['argmax']:9.1f} {us['chunked']:9.1f}  {row['fastest']}",
              flush=True)
    return rows
