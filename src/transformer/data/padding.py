"""Right-padding id rows into one tensor: the one padding helper every batch goes through.

Shapes: B rows, L the longest row (at least ``min_width``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


def pad_rows(rows: Sequence[Sequence[int]], *, pad_id: int, min_width: int = 1) -> Tensor:
    """Right-pad id lists into a (B, L) long tensor, ``L = max(longest row, min_width)``.

    An empty row is all padding, and no rows give a (0, min_width) tensor. The rows are laid out
    the same way in training batches, validation and decoding, so a model sees one layout.
    """
    width = max([len(r) for r in rows] + [min_width])
    out = np.full((len(rows), width), pad_id, dtype=np.int64)  # (B, L)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return torch.from_numpy(out)
