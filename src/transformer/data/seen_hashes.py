"""A set of 64-bit hashes at 8 bytes each, for ``prepare --filter dedup`` on corpora of tens of
millions of pairs (a Python ``set`` of ints costs about 70 bytes a member).

The members are kept as sorted runs whose sizes at least double from the newest to the oldest, as
in a log-structured merge tree: a batch is looked up in each run with a binary search, and its new
members become a run that is merged into the older ones while it is at least as large as the run
before it. There are at most about log2(members / batch) runs, each member is merged about as many
times, and a merge of two sorted runs is linear (timsort finds the two runs).
"""

from __future__ import annotations

import numpy as np


class SeenHashes:
    """``fresh = seen.add(hashes)``: which of ``hashes`` were not seen before, in this batch or an
    earlier one (the first of equal hashes in a batch counts as new); adds them."""

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []  # sorted uint64 arrays, oldest (largest) first

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self.runs)

    def add(self, hashes: np.ndarray) -> np.ndarray:
        """``hashes``: a uint64 array. Returns a boolean array of its length."""
        unique, first = np.unique(hashes, return_index=True)  # sorted
        new = ~self._known(unique)
        fresh = np.zeros(len(hashes), dtype=bool)
        fresh[first[new]] = True
        self._push(unique[new])
        return fresh

    def _known(self, values: np.ndarray) -> np.ndarray:
        known = np.zeros(len(values), dtype=bool)
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, values), len(run) - 1)
            known |= run[at] == values
        return known

    def _push(self, run: np.ndarray) -> None:
        if not len(run):
            return
        while self.runs and len(self.runs[-1]) <= len(run):
            run = np.sort(np.concatenate((self.runs.pop(), run)), kind="stable")
        self.runs.append(run)
