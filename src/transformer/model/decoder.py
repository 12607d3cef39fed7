"""The decoder stack (section 3.1, right half of Figure 1).

Shapes: B batch, T target length, S source length, D d_model, H heads.

Each layer has three sub-layers: masked self-attention, attention over the encoder output
(cross-attention) and the feed-forward network, wrapped like the encoder's (post-LN by default).
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer.model.feed_forward import PositionwiseFeedForward
from transformer.model.kv_cache import DecoderCache, KVCache
from transformer.model.multi_head_attention import MultiHeadAttention


class DecoderLayer(nn.Module):
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
        self.cross_attn = MultiHeadAttention(
            d_model=d_model, num_heads=num_heads, dropout=attention_dropout, cross=True
        )
        self.feed_forward = PositionwiseFeedForward(
            d_model=d_model, d_ff=d_ff, activation=activation, dropout=activation_dropout
        )
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        *,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """``x`` (B, T, D), ``memory`` (B, S, D); masks broadcast to (B, H, T, keys).

        Returns (B, T, D), self-attention weights (B, H, T, T') and cross weights (B, H, T, S),
        the weights only with ``need_weights``.
        """
        kw = {"need_weights": need_weights}
        if self.norm_first:
            h, self_w = self.self_attn(self.norm1(x), mask=self_mask, cache=self_cache, **kw)
            x = x + self.dropout(h)
            h, cross_w = self.cross_attn(self.norm2(x), memory, mask=memory_mask, cache=cross_cache, **kw)
            x = x + self.dropout(h)
            x = x + self.dropout(self.feed_forward(self.norm3(x)))
        else:
            h, self_w = self.self_attn(x, mask=self_mask, cache=self_cache, **kw)
            x = self.norm1(x + self.dropout(h))
            h, cross_w = self.cross_attn(x, memory, mask=memory_mask, cache=cross_cache, **kw)
            x = self.norm2(x + self.dropout(h))
            x = self.norm3(x + self.dropout(self.feed_forward(x)))
        return x, self_w, cross_w


class Decoder(nn.Module):
    """N decoder layers over embedded target input; a final LayerNorm when pre-LN."""

    def __init__(self, layers: list[DecoderLayer], *, final_norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = final_norm if final_norm is not None else nn.Identity()

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        *,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """(B, T, D) -> (B, T, D), per-layer self weights and per-layer cross weights."""
        self_weights: list[Tensor] = []
        cross_weights: list[Tensor] = []
        for i, layer in enumerate(self.layers):
            x, self_w, cross_w = layer(
                x,
                memory,
                self_mask=self_mask,
                memory_mask=memory_mask,
                self_cache=cache.self_attention[i] if cache is not None else None,
                cross_cache=cache.cross_attention[i] if cache is not None else None,
                need_weights=need_weights,
            )
            if need_weights:
                assert self_w is not None and cross_w is not None
                self_weights.append(self_w)
                cross_weights.append(cross_w)
        return self.norm(x), self_weights, cross_weights
