"""Positional encodings (section 3.5): sinusoidal (the paper) or learned (its Table 3, row E).

    PE(pos, 2i) = sin(pos / 10000^(2i / d_model)),  PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))

Shapes: B batch, L length, D d_model.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_table(max_len: int, d_model: int, *, layout: str = "interleaved") -> Tensor:
    """The sinusoidal encoding of positions 0 .. max_len - 1: (max_len, d_model), float32.

    ``layout="interleaved"`` puts sin and cos of frequency i at columns 2i and 2i + 1 (the paper);
    ``"halves"`` puts every sine first, then every cosine (tensor2tensor, Marian): the same
    values, columns permuted."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (L, 1)
    # 1 / 10000^(2i / d_model), computed in log space for precision
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    if layout == "halves":
        table = torch.cat([table[:, 0::2], table[:, 1::2]], dim=1)  # (L, D): sines | cosines
    elif layout != "interleaved":
        raise ValueError(f"layout must be 'interleaved' or 'halves', got {layout!r}")
    return table  # (L, D)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table; kept as a non-persistent buffer since it is derivable."""

    def __init__(self, *, d_model: int, max_len: int, layout: str = "interleaved") -> None:
        super().__init__()
        self.max_len = max_len
        table = sinusoidal_table(max_len, d_model, layout=layout)
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """``x`` (B, L, D) at absolute positions offset .. offset + L - 1 -> (B, L, D)."""
        end = offset + x.size(1)
        if end > self.max_len:
            raise ValueError(f"sequence of length {end} exceeds max_len={self.max_len}")
        return x + self.table[offset:end].to(x.dtype)


class LearnedPositionalEncoding(nn.Module):
    """Adds a trained embedding of each position."""

    def __init__(self, *, d_model: int, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.max_len:
            raise ValueError(f"sequence of length {end} exceeds max_len={self.max_len}")
        positions = torch.arange(offset, end, device=x.device)
        return x + self.embedding(positions)
