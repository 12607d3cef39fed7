"""Position-wise feed-forward network (section 3.3): FFN(x) = max(0, x W1 + b1) W2 + b2.

Shapes: B batch, L length, D d_model, F d_ff.

The paper notes this is "two convolutions with kernel size 1"; a Linear applied to the last axis is
the same function (tests/model/test_feed_forward.py checks it against Conv1d with copied weights).
"""

from __future__ import annotations

from torch import Tensor, nn

ACTIVATION = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}


class PositionwiseFeedForward(nn.Module):
    """(B, L, D) -> (B, L, D): Linear(D, F), activation, optional dropout, Linear(F, D)."""

    def __init__(
        self, *, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0
    ) -> None:
        super().__init__()
        if activation not in ACTIVATION:
            raise ValueError(f"activation must be one of {tuple(ACTIVATION)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.activation = ACTIVATION[activation]()
        self.dropout = nn.Dropout(dropout)  # inside the FFN: not in the paper, 0 by default
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, L, D)
