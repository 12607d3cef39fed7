"""Boolean attention masks (True = may attend), broadcastable to (B, H, Lq, Lk).

Shapes: B batch, L sequence length, Lq query length, Lk key length.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Keys that are not padding: (B, L) ids -> (B, 1, 1, L)."""
    return (tokens != pad_id)[:, None, None, :]


def subsequent_mask(length: int, *, offset: int = 0, device: torch.device | None = None) -> Tensor:
    """Causal mask for ``length`` new queries after ``offset`` cached positions.

    Query i (absolute position offset + i) may attend keys 0 .. offset + i.
    Returns (length, offset + length).
    """
    return torch.ones(length, offset + length, dtype=torch.bool, device=device).tril(offset)
