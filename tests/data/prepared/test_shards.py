"""One side of one corpus written and read back, ids of any vocabulary size."""

from __future__ import annotations

import numpy as np

from transformer.data.prepared.layout import id_dtype
from transformer.data.prepared.shards import Shard, ShardWriter


def test_ids_of_a_vocabulary_of_65536_or_more_are_uint32(tmp_path):
    assert id_dtype(65535) == np.uint16 and id_dtype(65536) == np.uint32
    writer = ShardWriter(tmp_path, "src", id_dtype(70000))
    rows = [[70000, 5], [], [65536, 1, 2]]
    writer.append(np.array([i for r in rows for i in r]), np.array([len(r) for r in rows]))
    writer.close()
    shard = Shard(tmp_path, "src", rows=3, tokens=5, dtype=id_dtype(70000))
    assert [shard[i].tolist() for i in range(3)] == rows
