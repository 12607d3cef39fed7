"""One rank of the prepared-data DDP test (run by test_mixing_ddp.py, not collected by pytest).

``mixing_ddp_worker.py DATA_DIR OUT``: joins the gloo group that the environment describes,
plans epochs 0 to 2 of DATA_DIR's training pairs for its rank, and rank 0 writes every rank's pair
indices and batch counts, with the pairs each epoch drew, to OUT as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from transformer.data.collation import collate_pairs
from transformer.data.prepared.directory import PreparedData
from transformer.data.prepared.mixing import MixedEpochs
from transformer.training import distributed as D


def main(data_dir: str, out: str) -> None:
    info, _ = D.init_distributed(device="cpu")
    data = PreparedData.open(data_dir)
    pairs = data.pairs("train", max_len=64)
    epochs = MixedEpochs(pairs, weights=data.weights, collate=collate_pairs, max_tokens=80, seed=1,
                         rank=info.rank, world_size=info.world_size)
    mine = {}
    for epoch in range(3):
        indices, bounds = epochs.plan(epoch)
        batches = epochs.for_epoch(epoch)
        assert len(batches) == len(bounds) - 1
        mine[epoch] = {"indices": indices.tolist(), "batches": len(batches),
                       "drawn": epochs.drawn(epoch).tolist()}
    everyone = D.gather_to_main(mine)
    if info.is_main:
        Path(out).write_text(json.dumps({"world_size": info.world_size, "ranks": everyone}))
    D.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:3])
