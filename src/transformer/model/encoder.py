"""The encoder stack (section 3.1, left half of Figure 1).

Shapes: B batch, S source length, D d_model, H heads.

Each layer has two sub-layers, self-attention and the feed-forward network, each wrapped as
``LayerNorm(x + Dropout(Sublayer(x)))`` (post-LN, the paper) or ``x + Dropout(Sublayer(LayerNorm(x)))``
(pre-LN, ``norm_first=True``; the stack then ends with a final LayerNorm).
"""

from __future__ import annotations

from torch import Tensor

from transformer.model.sublayers import LayerStack, SublayerStack


class EncoderLayer(SublayerStack):
    """Self-attention, then the feed-forward network (:class:`SublayerStack` holds both)."""

    def forward(
        self, x: Tensor, *, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """``x`` (B, S, D), ``mask`` (B, 1, 1, S) -> (B, S, D) and weights (B, H, S, S) or None."""
        x, weights = self.residual(x, self.norm1, lambda h: self.self_attn(h, mask=mask, need_weights=need_weights))
        return self.feed_forward_sublayer(x, self.norm2), weights


class Encoder(LayerStack):
    """N encoder layers over embedded input; a final LayerNorm when pre-LN."""

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
