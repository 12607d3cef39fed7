"""One process of the data-parallel test (run by test_distributed.py, not collected by pytest).

Each of WORLD_SIZE ranks takes its share of every global batch of 8 sentence pairs, as 2
micro-batches accumulated into one update; rank 0 writes the weights after 3 updates.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).parent))
from conftest import ListData, collate, make_pairs, tiny_model  # noqa: E402
from transformer.training import distributed  # noqa: E402
from transformer.training.trainer import TrainConfig, Trainer  # noqa: E402
from transformer.training.translation_task import TranslationTask  # noqa: E402

GLOBAL_BATCH = 8
STEPS = 3


def local_batches(rank: int, world_size: int, accumulate: int) -> list:
    """This rank's micro-batches: its contiguous share of each global batch, cut in ``accumulate``."""
    pairs = make_pairs(GLOBAL_BATCH * STEPS, seed=4)
    share = GLOBAL_BATCH // world_size
    size = share // accumulate
    out = []
    for step in range(STEPS):
        mine = pairs[step * GLOBAL_BATCH + rank * share :][:share]
        out += [collate(mine[i : i + size]) for i in range(0, share, size)]
    return out


def train(rank: int, world_size: int, accumulate: int) -> torch.nn.Module:
    torch.set_num_threads(1)
    model = tiny_model(seed=0)
    trainer = Trainer(
        model=model, task=TranslationTask(), optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        train_data=ListData(local_batches(rank, world_size, accumulate), shuffle=False),
        config=TrainConfig(max_steps=STEPS, accumulate=accumulate, clip_norm=0.5, eval_every=0,
                           log_every=100),
        device="cpu",
    )
    trainer.fit()
    return model


if __name__ == "__main__":
    info, _ = distributed.init_distributed(device="cpu")
    trained = train(info.rank, info.world_size, accumulate=2)
    if info.is_main:
        save_file({k: v.contiguous() for k, v in trained.state_dict().items()}, sys.argv[1])
    distributed.shutdown()
