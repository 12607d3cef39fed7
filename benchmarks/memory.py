"""Training-memory estimate vs measured peak, configuration by configuration.

For each configuration, :func:`transformer.memory.estimate_training_memory` predicts the peak of a
training step and :func:`transformer.memory.measure_training_peak` measures it (two real steps:
forward, label-smoothed cross-entropy or plain cross-entropy, backward, clipping, Adam; the second
step counts). On a GPU the measurement is ``torch.cuda.max_memory_allocated``; on the CPU it is the
peak of live tensor storage seen by a ``TorchDispatchMode``. Each row names the equivalent
``transformer memory ... --measure`` command.

    .venv/bin/python benchmarks/memory.py            # writes benchmarks/results/memory.json
    .venv/bin/python benchmarks/memory.py --quick    # the tiny rows only
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

from machine import describe  # benchmarks/machine.py
from transformer import ModelConfig
from transformer.memory import (
    TrainingStep,
    estimate_training_memory,
    format_bytes,
    measure_training_peak,
)

RESULTS = Path(__file__).resolve().parent / "results" / "memory.json"

# (name, preset, config overrides, batch and precision, extra command-line flags)
ROWS = [
    ("tiny translation", "tiny", {"vocab_size": 1000},
     {"batch_size": 8, "src_len": 20, "tgt_len": 24}, ""),
    ("tiny pre-LN GELU", "tiny", {"vocab_size": 500, "norm_first": True, "activation": "gelu"},
     {"batch_size": 8, "src_len": 16, "tgt_len": 20}, "--norm-first --activation gelu"),
    ("tiny shared+tied, learned pos., attn+FFN dropout", "tiny",
     {"vocab_size": 800, "share_embeddings": True, "tie_embeddings": True,
      "positional": "learned", "attention_dropout": 0.1, "activation_dropout": 0.1},
     {"batch_size": 4, "src_len": 30, "tgt_len": 25},
     "--share-embeddings --tie-embeddings --positional learned --attention-dropout 0.1 "
     "--activation-dropout 0.1"),
    ("tiny translation, bf16 autocast", "tiny", {"vocab_size": 1000},
     {"batch_size": 8, "src_len": 20, "tgt_len": 24, "precision": "bf16"}, ""),
    ("tiny classifier, mean pooling", "tiny", {"vocab_size": 1000},
     {"batch_size": 8, "src_len": 40, "encoder_only": True, "num_labels": 5},
     "--encoder-only --num-labels 5"),
    ("small translation", "small", {"vocab_size": 8000},
     {"batch_size": 32, "src_len": 48, "tgt_len": 48}, ""),
    ("small translation, bf16 autocast", "small", {"vocab_size": 8000},
     {"batch_size": 32, "src_len": 48, "tgt_len": 48, "precision": "bf16"}, ""),
    ("small classifier, 28 labels", "small", {"vocab_size": 8000},
     {"batch_size": 64, "src_len": 128, "encoder_only": True, "num_labels": 28},
     "--encoder-only --num-labels 28"),
    ("base translation", "base", {"vocab_size": 8000},
     {"batch_size": 16, "src_len": 40, "tgt_len": 40}, ""),
]
FLAGS = {"batch_size": "--batch-size", "src_len": "--src-len", "tgt_len": "--tgt-len",
         "precision": "--precision"}


def command(preset: str, overrides: dict, shape: dict, extra: str, device: str) -> str:
    parts = ["transformer memory", f"--preset {preset}", f"--vocab-size {overrides['vocab_size']}"]
    parts += [f"{FLAGS[k]} {v}" for k, v in shape.items() if k in FLAGS]
    if extra:
        parts.append(extra)
    return " ".join([*parts, f"--device {device}", "--measure"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the tiny rows")
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [r for r in ROWS if not args.quick or r[1] == "tiny"]
    results = []
    print(f"{'configuration':<50} {'estimate':>10} {'measured':>10} {'ratio':>6}  peak at")
    for name, preset, overrides, shape, extra in rows:
        vocab = overrides["vocab_size"]
        fields = {k: v for k, v in overrides.items() if k != "vocab_size"}
        config = ModelConfig.preset(preset, vocab, **fields)
        start = time.perf_counter()
        estimate = estimate_training_memory(config, TrainingStep(**shape), device=args.device)
        measured = measure_training_peak(config, TrainingStep(**shape), device=args.device)
        ratio = estimate.peak_bytes / measured.peak_bytes
        print(f"{name:<50} {format_bytes(estimate.peak_bytes):>10} "
              f"{format_bytes(measured.peak_bytes):>10} {ratio:>6.3f}  {estimate.peak_phase}",
              flush=True)
        results.append({
            "name": name, "command": command(preset, overrides, shape, extra, args.device),
            "estimate_bytes": estimate.peak_bytes, "measured_bytes": measured.peak_bytes,
            "ratio": ratio, "estimate_phase": estimate.peak_phase,
            "measured_phase_peaks": measured.phase_peaks, "method": measured.method,
            "seconds": round(time.perf_counter() - start, 2),
        })
    print()
    for r in results:
        print(r["command"])
    # a smoke run never overwrites the real figures
    output = Path(tempfile.gettempdir()) / "memory_quick.json" if args.quick else RESULTS
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({
        "device": args.device, "machine": platform.platform(), "hardware": describe(), "torch": torch.__version__,
        "threads": args.threads, "rows": results}, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {output}")


if __name__ == "__main__":
    main()
