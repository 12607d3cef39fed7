"""What the training loop's guards cost: updates per second of the Trainer of two source trees
(signal flag, periodic-checkpoint clock, non-finite check), alternating fresh processes.

    taskset -c 1 .venv/bin/python benchmarks/trainer_overhead.py --old /work/main --new .

Each round trains a small model (d_model 64, 2+2 layers, vocabulary 64, batches of 32 x 16 tokens)
for ``--steps`` updates with each tree, clipping on (the default) and off (where the non-finite
check computes the gradient norm itself); the best round of each counts. Then it times the added
calls directly in one process (steadier than processes on a shared machine). Prints both and
writes benchmarks/results/trainer_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from machine import describe  # benchmarks/machine.py

RESULTS = Path(__file__).resolve().parent / "results" / "trainer_overhead.json"

CHILD = r"""
import random, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from transformer import ModelConfig, Transformer
from transformer.data.batch_types import Batch
from transformer.training.trainer import LoopConfig, Trainer
from transformer.training.translation_task import TranslationTask
steps, clip = int(sys.argv[2]), (float(sys.argv[3]) or None)
rng = random.Random(0)
def batch():
    src = torch.tensor([[rng.randrange(4, 64) for _ in range(16)] for _ in range(32)])
    tgt = torch.flip(src, [1])
    tgt_in = torch.cat([torch.full((32, 1), 2), tgt], 1)
    tgt_out = torch.cat([tgt, torch.full((32, 1), 3)], 1)
    return Batch(src, tgt_in, tgt_out, int(src.numel()), int(tgt_out.numel()))
batches = [batch() for _ in range(8)]
class Data:
    def for_epoch(self, epoch):
        return batches
torch.manual_seed(0)
model = Transformer(ModelConfig.tiny(64, d_model=64, d_ff=256, num_heads=4, num_encoder_layers=2,
                                     num_decoder_layers=2, dropout=0.0, max_len=32))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
trainer = Trainer(model=model, task=TranslationTask(), optimizer=opt, train_data=Data(),
                  config=LoopConfig(max_steps=steps, clip_norm=clip, eval_every=0, log_every=10**6))
start = time.perf_counter()
trainer.fit()
print(steps / (time.perf_counter() - start))
"""


def direct(calls: int = 2000) -> dict[str, float]:
    """Microseconds per call of what the loop adds to an update, timed in this process (this
    tree), beside gradient clipping for scale."""
    import time

    import torch

    from transformer import ModelConfig, Transformer
    from transformer.training.preemption import Preemption
    from transformer.training.trainer import LoopConfig, Trainer
    from transformer.training.translation_task import TranslationTask

    torch.set_num_threads(1)
    model = Transformer(ModelConfig.tiny(64, d_model=64, d_ff=256, num_heads=4, num_encoder_layers=2,
                                         num_decoder_layers=2, dropout=0.0, max_len=32))
    for param in model.parameters():
        param.grad = torch.randn_like(param)

    class NoData:
        def for_epoch(self, epoch: int) -> list:
            return []

    trainer = Trainer(model=model, task=TranslationTask(), optimizer=torch.optim.Adam(model.parameters()),
                      train_data=NoData(), config=LoopConfig(max_steps=1, clip_norm=None))
    loss, norm = torch.tensor(3.0), torch.tensor(1.0)
    out = {}
    with Preemption() as preemption:
        for name, call in [
            ("non-finite check, clipping on", lambda: trainer._non_finite(loss, norm)),
            ("non-finite check, clipping off", lambda: trainer._non_finite(loss, None)),
            ("signal and clock check", lambda: trainer._at_boundary(preemption, 1.0)),
            ("clip_grad_norm_ (for scale)",
             lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)),
        ]:
            call()
            start = time.perf_counter()
            for _ in range(calls):
                call()
            out[name] = round((time.perf_counter() - start) / calls * 1e6, 1)
    return out


def rate(src: Path, steps: int, clip: float) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, str(src), str(steps), str(clip)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="the other tree's checkout")
    parser.add_argument("--new", type=Path, default=Path("."))
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for clip in (1.0, 0.0):
        best = {"old": 0.0, "new": 0.0}
        for r in range(args.rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for name in order:
                tree = (args.old if name == "old" else args.new).resolve() / "src"
                best[name] = max(best[name], rate(tree, args.steps, clip))
        rows.append({"clip_norm": clip or None, "old_updates_per_s": round(best["old"], 2),
                     "new_updates_per_s": round(best["new"], 2),
                     "new_over_old": round(best["new"] / best["old"], 3)})
    print(f"{'clip_norm':>10} {'old upd/s':>10} {'new upd/s':>10} {'new / old':>10}")
    for row in rows:
        print(f"{str(row['clip_norm']):>10} {row['old_updates_per_s']:>10} "
              f"{row['new_updates_per_s']:>10} {row['new_over_old']:>10}")
    timed = direct()
    for name, us in timed.items():
        print(f"{name}: {us} us per update")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"command": " ".join(sys.argv), "hardware": describe(), "steps": args.steps,
                                   "rounds": args.rounds, "rows": rows, "direct_us": timed},
                                  indent=2) + "\n")


if __name__ == "__main__":
    main()
