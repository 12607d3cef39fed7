"""Ensemble decoding speed: sentences per second for 1, 2 and 4 members decoding together
(:class:`transformer.decoding.Ensemble`, one fast decoder and cache per member), greedy and beam,
on random models of the recipe's shape (d128 4+4, vocabulary 8000, shared and tied), one thread.

    python benchmarks/ensemble.py                      # the table, and results/ensemble.json
    python benchmarks/ensemble.py --sentences 64 --members 1 2

Members are models of the same shape with different random weights (what a run's snapshots are to
the decoder); their outputs are not meaningful, so every sentence is decoded to ``--length``
tokens (EOS forbidden before it) and the members' work is the same in every row. BLEU of snapshot
ensembles needs a trained run: ``transformer evaluate --model RUN --ensemble-last K``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from decoding_common import BOS, EOS, build_models, random_sources
from machine import describe
from transformer.decoding import Ensemble, beam_search, greedy_decode

SHAPE = dict(vocab=8000, d_model=128, heads=4, layers=4, d_ff=256)  # the multi30k-cpu recipe's


def members(count: int) -> list[torch.nn.Module]:
    """``count`` models of :data:`SHAPE`, seeds 0, 1, ..."""
    out = []
    for seed in range(count):
        torch.manual_seed(seed)
        model, _ = build_models(**SHAPE, hf=False)
        with torch.no_grad():  # build_models seeds 0 itself: give each member its own weights
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.02 * seed)
        out.append(model.eval())
    return out


def sentences_per_second(model, src: torch.Tensor, *, beam: int, length: int, repeats: int) -> float:
    """The best of ``repeats`` timed runs (after one untimed) of decoding ``src``."""
    def run():
        kw = dict(bos_id=BOS, eos_id=EOS, max_len=length, min_length=length - 1)
        if beam == 1:
            return greedy_decode(model, src, **kw)
        return beam_search(model, src, beam_size=beam, **kw)

    run()
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return src.size(0) / best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--sentences", type=int, default=32)
    p.add_argument("--src-len", type=int, default=16)
    p.add_argument("--length", type=int, default=16, help="tokens decoded per sentence")
    p.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "ensemble.json"))
    args = p.parse_args()
    torch.set_num_threads(1)
    src = random_sources(batch=args.sentences, src_len=args.src_len, vocab=SHAPE["vocab"], seed=0)
    pool = members(max(args.members))
    rows = []
    for count in args.members:
        model = pool[0] if count == 1 else Ensemble(pool[:count])
        row = {"members": count}
        for beam in args.beams:
            row[f"beam {beam}"] = sentences_per_second(model, src, beam=beam, length=args.length,
                                                       repeats=args.repeats)
        rows.append(row)
    base = rows[0]
    print(f"{'members':>7} " + " ".join(f"{f'beam {b} sent/s':>16} {'x 1':>6}" for b in args.beams))
    for row in rows:
        print(f"{row['members']:>7} " + " ".join(
            f"{row[f'beam {b}']:>16.1f} {row[f'beam {b}'] / base[f'beam {b}']:>6.2f}" for b in args.beams))
    result = {"shape": SHAPE, "sentences": args.sentences, "src_len": args.src_len,
              "length": args.length, "threads": 1, "rows": rows, "machine": describe()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
