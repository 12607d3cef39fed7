"""Batching benchmark: Multi30k en-de train in token-budget batches.

Trains a joint SentencePiece BPE model (8k pieces) on the training text, encodes it, and builds
epochs of batches of at most 4096 tokens (padding counted) three ways, side by side in one run:

- ``buckets (src, tgt)``: TokenBatchSampler given (src_len, tgt_len) pairs (the default use),
- ``buckets (width)``: TokenBatchSampler given one width per pair (sorted by max(src, tgt) only),
- ``random``: the same token budget over a random order (no length bucketing), the baseline.

For each it reports the batch count, the share of padding in the collated tensors (src and
tgt_out together, and each side) and the time to build an epoch of index batches and of collated
tensors. It also checks DDP sharding (batches per rank, repeated batches).

    .venv/bin/python benchmarks/batching.py            # writes benchmarks/results/batching.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from machine import describe  # benchmarks/machine.py
from transformer.data.collation import iter_batches
from transformer.data.corpora import load_corpus
from transformer.data.encoding import encode_pairs
from transformer.data.token_batch_sampler import TokenBatchSampler, padding_stats
from transformer.data.tokenizer_pair import train_tokenizers

RESULTS = Path(__file__).resolve().parent / "results" / "batching.json"


def random_batches(widths: list[int], *, max_tokens: int, seed: int) -> list[list[int]]:
    """The baseline: the same budget (n * widest <= max_tokens) over a random order."""
    order = np.random.default_rng(seed).permutation(len(widths)).tolist()
    batches: list[list[int]] = []
    batch: list[int] = []
    widest = 0
    for i in order:
        w = max(widest, widths[i])
        if batch and (len(batch) + 1) * w > max_tokens:
            batches.append(batch)
            batch, w = [], widths[i]
        batch.append(i)
        widest = w
    if batch:
        batches.append(batch)
    return batches


def timed(fn, repeats: int) -> tuple[float, object]:
    """Median seconds of ``repeats`` calls of ``fn(epoch)`` and the last result."""
    times = []
    result = None
    for epoch in range(repeats):
        start = time.perf_counter()
        result = fn(epoch)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=5, help="epochs timed (median)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(1)

    corpus = load_corpus("multi30k", "train", "en", "de")
    start = time.perf_counter()
    src_tok, tgt_tok = train_tokenizers(
        corpus.src, corpus.tgt, vocab_size=args.vocab_size, joint=True, model_type="bpe"
    )
    tokenizer_s = time.perf_counter() - start
    start = time.perf_counter()
    encoded = encode_pairs(corpus, src_tok, tgt_tok, max_len=args.max_len)
    encode_s = time.perf_counter() - start
    lengths = encoded.lengths
    widths = encoded.widths
    real_tokens = sum(s + t + 1 for s, t in lengths)

    def sampler_epoch(sampler: TokenBatchSampler):
        def build(epoch: int) -> list[list[int]]:
            sampler.set_epoch(epoch)
            return list(sampler)

        return build

    methods = {
        "buckets (src, tgt)": sampler_epoch(TokenBatchSampler(lengths, max_tokens=args.max_tokens)),
        "buckets (width)": sampler_epoch(TokenBatchSampler(widths, max_tokens=args.max_tokens)),
        "random": lambda epoch: random_batches(widths, max_tokens=args.max_tokens, seed=epoch),
    }
    rows = []
    for name, build in methods.items():
        index_s, batches = timed(build, args.epochs)
        stats = padding_stats(lengths, batches)
        start = time.perf_counter()
        collated = list(iter_batches(encoded, batches))
        collate_s = time.perf_counter() - start
        # the tensors agree with the statistics computed from lengths
        slots = sum(b.src.numel() + b.tgt_out.numel() for b in collated)
        assert slots == stats.src_slots + stats.tgt_slots
        rows.append(
            {
                "method": name,
                "batches": len(batches),
                "sentences_per_batch": round(len(encoded) / len(batches), 1),
                "padding_share": round(stats.padding_share, 4),
                "src_padding_share": round(stats.src_padding_share, 4),
                "tgt_padding_share": round(stats.tgt_padding_share, 4),
                "index_epoch_ms": round(index_s * 1000, 2),
                "collate_epoch_ms": round(collate_s * 1000, 1),
            }
        )
    base = rows[-1]
    for row in rows:
        row["padding_vs_random"] = round(row["padding_share"] / base["padding_share"], 3)

    ddp = []
    for world_size in (2, 4, 8):
        samplers = [
            TokenBatchSampler(lengths, max_tokens=args.max_tokens, rank=r, world_size=world_size)
            for r in range(world_size)
        ]
        shards = [list(s) for s in samplers]
        seen = sorted(i for shard in shards for batch in shard for i in batch)
        ddp.append(
            {
                "world_size": world_size,
                "batches_per_rank": len(shards[0]),
                "equal_counts": len({len(s) for s in shards}) == 1,
                "repeated_batches": samplers[0].num_repeated,
                "every_pair_once": seen == list(range(len(encoded))),
            }
        )

    print(
        f"Multi30k train en-de: {len(corpus)} pairs, joint BPE {src_tok.vocab_size} pieces "
        f"(trained in {tokenizer_s:.2f} s, encoded in {encode_s:.2f} s), "
        f"{real_tokens} tokens (src + tgt with EOS), max_tokens={args.max_tokens}"
    )
    header = f"{'method':<20} {'batches':>7} {'sent/b':>7} {'pad':>7} {'pad src':>8} {'pad tgt':>8} {'vs rnd':>7} {'index ms':>9} {'collate ms':>11}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['method']:<20} {r['batches']:>7} {r['sentences_per_batch']:>7} "
            f"{r['padding_share']:>7.2%} {r['src_padding_share']:>8.2%} {r['tgt_padding_share']:>8.2%} "
            f"{r['padding_vs_random']:>7.3f} {r['index_epoch_ms']:>9.2f} {r['collate_epoch_ms']:>11.1f}"
        )
    for d in ddp:
        print(
            f"DDP world_size={d['world_size']}: {d['batches_per_rank']} batches per rank, "
            f"equal counts {d['equal_counts']}, repeated {d['repeated_batches']}, "
            f"every pair once {d['every_pair_once']}"
        )

    result = {
        "benchmark": "batching",
        "command": "python benchmarks/batching.py " + " ".join(sys.argv[1:]),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "hardware": describe(),
        },
        "corpus": "multi30k/train.en-de",
        "pairs": len(encoded),
        "vocab_size": src_tok.vocab_size,
        "max_tokens": args.max_tokens,
        "max_len": args.max_len,
        "real_tokens": real_tokens,
        "tokenizer_train_s": round(tokenizer_s, 3),
        "encode_s": round(encode_s, 3),
        "methods": rows,
        "ddp": ddp,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
