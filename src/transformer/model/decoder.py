"""The decoder stack (section 3.1, right half of Figure 1).

Shapes: B batch, T target length, S source length, D d_model, H heads.

Each layer has three sub-layers: masked self-attention, attention over the encoder output
(cross-attention) and the feed-forward network, wrapped like the encoder's (post-LN by default).
"""

from __future__ import annotations

from torch import Tensor

from transformer.model.kv_cache import DecoderCache, KVCache
from transformer.model.sublayers import LayerStack, SublayerStack


class DecoderLayer(SublayerStack):
    """Masked self-attention, attention over the encoder output, then the feed-forward network
    (:class:`SublayerStack` holds the three)."""

    cross = True

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
        x, self_w = self.residual(x, self.norm1, lambda h: self.self_attn(h, mask=self_mask, cache=self_cache, **kw))
        x, cross_w = self.residual(
            x, self.norm2, lambda h: self.cross_attn(h, memory, mask=memory_mask, cache=cross_cache, **kw)
        )
        x = self.feed_forward_sublayer(x, self.norm3)
        return x, self_w, cross_w


class Decoder(LayerStack):
    """N decoder layers over embedded target input; a final LayerNorm when pre-LN."""

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
