"""The encoder stack (section 3.1, left half of Figure 1).

Shapes: B batch, S source length, D d_model, H heads.

Each layer has two sub-layers, self-attention and the feed-forward network, each wrapped as
``LayerNorm(x + Dropout(Sublayer(x)))`` (post-LN, the paper) or ``x + Dropout(Sublayer(LayerNorm(x)))``
(pre-LN, ``norm_first=True``; the stack then ends with a final LayerNorm).
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer.model.feed_forward import PositionwiseFeedForward
from transformer.model.multi_head_attention import MultiHeadAttention


class EncoderLayer(nn.Module):
    def __init__(
        self,
        *,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model=d_model, num_heads=num_heads, dropout=attention_dropout
        )
        self.feed_forward = PositionwiseFeedForward(
            d_model=d_model, d_ff=d_ff, activation=activation, dropout=activation_dropout
        )
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, *, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """``x`` (B, S, D), ``mask`` (B, 1, 1, S) -> (B, S, D) and weights (B, H, S, S) or None."""
        if self.norm_first:
            attended, weights = self.self_attn(self.norm1(x), mask=mask, need_weights=need_weights)
            x = x + self.dropout(attended)
            x = x + self.dropout(self.feed_forward(self.norm2(x)))
        else:
            attended, weights = self.self_attn(x, mask=mask, need_weights=need_weights)
            x = self.norm1(x + self.dropout(attended))
            x = self.norm2(x + self.dropout(self.feed_forward(x)))
        return x, weights


class Encoder(nn.Module):
    """N encoder layers over embedded input; a final LayerNorm when pre-LN."""

    def __init__(self, layers: list[EncoderLayer], *, final_norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = final_norm if final_norm is not None else nn.Identity()

    def forward(
        self, x: Tensor, *, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        """``x`` (B, S, D) -> (B, S, D) and, with ``need_weights``, one (B, H, S, S) per layer."""
        all_weights: list[Tensor] = []
        for layer in self.layers:
            x, weights = layer(x, mask=mask, need_weights=need_weights)
            if weights is not None:
                all_weights.append(weights)
        return self.norm(x), all_weights
