"""What an encoder and a decoder layer share (section 3.1): sub-layers, each wrapped in a residual
connection and layer normalization.

Shapes: B batch, L length, D d_model.

Each sub-layer's output is ``LayerNorm(x + Dropout(Sublayer(x)))`` (post-LN, the paper's), or
``x + Dropout(Sublayer(LayerNorm(x)))`` with ``norm_first=True`` (pre-LN; the stack then ends with a
final LayerNorm). An encoder layer has two sub-layers (self-attention, the feed-forward network), a
decoder layer three (masked self-attention, attention over the encoder output, the feed-forward
network); each has its own LayerNorm, ``norm1``, ``norm2`` (``norm3``) in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from torch import Tensor, nn

from transformer.model.feed_forward import PositionwiseFeedForward
from transformer.model.multi_head_attention import MultiHeadAttention

W = TypeVar("W")


class SublayerStack(nn.Module):
    """The sub-layers of one layer: ``self_attn``, ``cross_attn`` (when ``cross``; the decoder's),
    ``feed_forward``, one LayerNorm each and one dropout for the residual branches."""

    cross = False  # a decoder layer's class sets True

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
        self.self_attn = MultiHeadAttention(d_model=d_model, num_heads=num_heads, dropout=attention_dropout)
        if self.cross:
            self.cross_attn = MultiHeadAttention(
                d_model=d_model, num_heads=num_heads, dropout=attention_dropout, cross=True
            )
        self.feed_forward = PositionwiseFeedForward(
            d_model=d_model, d_ff=d_ff, activation=activation, dropout=activation_dropout
        )
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        if self.cross:
            self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def residual(self, x: Tensor, norm: nn.Module, sublayer: Callable[[Tensor], tuple[Tensor, W]]) -> tuple[Tensor, W]:
        """``x`` (B, L, D) through one sub-layer with its residual connection and ``norm``:
        (B, L, D) and what the sub-layer gives beside its output (attention weights, or None).
        ``sublayer`` maps its input to (output, beside)."""
        if self.norm_first:
            out, beside = sublayer(norm(x))
            return x + self.dropout(out), beside
        out, beside = sublayer(x)
        return norm(x + self.dropout(out)), beside

    def feed_forward_sublayer(self, x: Tensor, norm: nn.Module) -> Tensor:
        """The last sub-layer of either layer: the position-wise feed-forward network."""
        return self.residual(x, norm, lambda h: (self.feed_forward(h), None))[0]


class LayerStack(nn.Module):
    """N layers of one kind (the encoder's or the decoder's, section 3.1) and the final LayerNorm
    a pre-LN stack ends with (``final_norm``; None: identity, the paper's post-LN)."""

    def __init__(self, layers: list[SublayerStack], *, final_norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = final_norm if final_norm is not None else nn.Identity()
