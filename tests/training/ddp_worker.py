"""One process of the data-parallel tests (run by test_distributed.py, not collected by pytest).

``ddp_worker.py OUT``: each of WORLD_SIZE ranks takes its share of every global batch of 8 sentence
pairs, as 2 micro-batches accumulated into one update; rank 0 writes the weights after 3 updates.
``ddp_worker.py OUT classify``: the same for a classifier (8 labelled texts a global batch).

``ddp_worker.py RUN_DIR preempt``: trains into RUN_DIR until a signal; after update 3 every rank
writes ``ready-RANK``; on the stop each rank writes the update it stopped after to
``stopped-RANK`` and exits with the stop's status.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).parent))
from conftest import ListData, collate, make_pairs, tiny_model  # noqa: E402
from transformer.config.model import ModelConfig  # noqa: E402
from transformer.data.collation import collate_classification  # noqa: E402
from transformer.errors import RunStopped  # noqa: E402
from transformer.model import TransformerClassifier  # noqa: E402
from transformer.training import distributed  # noqa: E402
from transformer.training.classification_task import ClassificationTask  # noqa: E402
from transformer.training.trainer import LoopConfig, Trainer  # noqa: E402
from transformer.training.translation_task import TranslationTask  # noqa: E402

GLOBAL_BATCH = 8
STEPS = 3


NUM_LABELS = 3


def local_batches(rank: int, world_size: int, accumulate: int, *, classify: bool = False) -> list:
    """This rank's micro-batches: its contiguous share of each global batch, cut in ``accumulate``
    (with ``classify``: each source's ids labelled by their length, of 3 labels)."""
    pairs = make_pairs(GLOBAL_BATCH * STEPS, seed=4)
    items = [(src, [len(src) % NUM_LABELS]) for src, _ in pairs] if classify else pairs
    share = GLOBAL_BATCH // world_size
    size = share // accumulate
    out = []
    for step in range(STEPS):
        mine = items[step * GLOBAL_BATCH + rank * share :][:share]
        out += [collate_classification(mine[i : i + size], num_labels=NUM_LABELS, multi_label=False)
                if classify else collate(mine[i : i + size]) for i in range(0, share, size)]
    return out


def tiny_classifier(*, seed: int = 0) -> TransformerClassifier:
    torch.manual_seed(seed)
    cfg = ModelConfig.tiny(32, dropout=0.0, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1,
                           num_decoder_layers=0, max_len=32)
    return TransformerClassifier(cfg, num_labels=NUM_LABELS)


def train(rank: int, world_size: int, accumulate: int, *, classify: bool = False) -> torch.nn.Module:
    torch.set_num_threads(1)
    model = tiny_classifier(seed=0) if classify else tiny_model(seed=0)
    task = ClassificationTask(num_labels=NUM_LABELS, multi_label=False) if classify else TranslationTask()
    trainer = Trainer(
        model=model, task=task, optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        train_data=ListData(local_batches(rank, world_size, accumulate, classify=classify),
                            shuffle=False),
        # no clipping: it would rescale a wrongly normalised gradient to the right norm
        config=LoopConfig(max_steps=STEPS, accumulate=accumulate, clip_norm=None, eval_every=0,
                           log_every=100),
        device="cpu",
    )
    trainer.fit()
    return model


class Paced(TranslationTask):
    """At its 4th batch (update 3 done) marks that it got there with a file and waits for the
    test's ``go`` file, written once the test has signalled a rank: the signal lands while every
    rank is inside an update, however slow the machine."""

    def __init__(self, run_dir: Path, rank: int) -> None:
        super().__init__()
        self.run_dir, self.rank, self.calls = run_dir, rank, 0

    def loss(self, model, batch):
        self.calls += 1
        if self.calls == 4:
            (self.run_dir / f"ready-{self.rank}").write_text("3")
            while not (self.run_dir / "go").exists():
                time.sleep(0.005)
        return super().loss(model, batch)


def preempt(run_dir: Path, rank: int, world_size: int) -> int:
    torch.set_num_threads(1)
    model = tiny_model(seed=0)
    trainer = Trainer(
        model=model, task=Paced(run_dir, rank), optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        train_data=ListData(local_batches(rank, world_size, 1)),
        config=LoopConfig(max_steps=100_000, eval_every=0, log_every=1), run_dir=run_dir,
        device="cpu",
    )
    try:
        trainer.fit()
    except RunStopped as stop:
        (run_dir / f"stopped-{rank}").write_text(str(trainer.state.step))
        return stop.exit_status
    return 0


if __name__ == "__main__":
    info, _ = distributed.init_distributed(device="cpu")
    if sys.argv[2:] == ["preempt"]:
        distributed.end_process(preempt(Path(sys.argv[1]), info.rank, info.world_size))
    trained = train(info.rank, info.world_size, accumulate=2, classify=sys.argv[2:] == ["classify"])
    if info.is_main:
        save_file({k: v.contiguous() for k, v in trained.state_dict().items()}, sys.argv[1])
    distributed.end_process(0)
