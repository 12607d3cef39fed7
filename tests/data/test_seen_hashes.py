"""The dedup filter's set of hashes answers as a Python set does, at 8 bytes a member."""

from __future__ import annotations

import numpy as np
import pytest

from transformer.data.seen_hashes import SeenHashes


def reference(batches):
    seen, masks = set(), []
    for batch in batches:
        mask = []
        for h in batch.tolist():
            mask.append(h not in seen)
            seen.add(h)
        masks.append(np.asarray(mask, dtype=bool))
    return masks, len(seen)


@pytest.mark.parametrize("seed", range(4))
def test_fresh_masks_equal_a_python_set(seed):
    rng = np.random.default_rng(seed)
    # small value ranges make repeats within a batch and across batches of every age; sizes vary
    # (empty batches too) so the runs merge in every pattern
    batches = [rng.integers(0, high, size=size, dtype=np.uint64)
               for high, size in zip(rng.choice([50, 5_000, 2**64 - 1], size=60),
                                     rng.integers(0, 700, size=60), strict=True)]
    batches.append(np.asarray([0, 2**64 - 1, 2**64 - 1, 1], dtype=np.uint64))  # the ends of uint64
    expected, members = reference(batches)
    seen = SeenHashes()
    for batch, want in zip(batches, expected, strict=True):
        fresh = seen.add(batch)
        assert fresh.dtype == bool
        np.testing.assert_array_equal(fresh, want)
    assert len(seen) == members and seen.nbytes == 8 * members
    assert all(np.all(run[1:] > run[:-1]) for run in seen.runs)


def test_runs_stay_few_as_members_grow():
    seen = SeenHashes()
    rng = np.random.default_rng(0)
    for _ in range(1000):
        seen.add(rng.integers(0, 2**63, size=100, dtype=np.uint64))
    assert len(seen) == 100_000
    assert len(seen.runs) <= 11  # about log2(members / batch) + 1
    sizes = [len(run) for run in seen.runs]
    assert sizes == sorted(sizes, reverse=True)
