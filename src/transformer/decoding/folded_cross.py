"""Cross-attention of a decoding step with its projections folded into the encoder memory.

Shapes: N sentences, G rows (beams) per sentence, R = N * G rows, S source length, H heads,
Dh head dimension, D = H * Dh (d_model).

A decoder layer's cross-attention (equation (1) of the paper, with the multi-head projections of
section 3.2.2) computes, for a row ``x`` (D,) and the keys ``k_hs`` / values ``v_hs`` (Dh,) that
the memory gives head h at source position s::

    q_h   = W^Q_h x + b^Q_h                                    # (Dh,)
    p_hs  = softmax_s((q_h . k_hs) / sqrt(Dh))
    out   = b^O + sum_h W^O_h (sum_s p_hs v_hs)               # (D,)

Within one search the memory never changes, so both projections can be moved onto it, once per
search, by associativity::

    q_h . k_hs / sqrt(Dh) = x . (W^Q_h^T k_hs / sqrt(Dh)) + b^Q_h . k_hs / sqrt(Dh)
                          = x . key_hs + bias_hs
    out                   = sum_hs p_hs (W^O_h v_hs + b^O / H)  = sum_hs p_hs value_hs

(the last because each head's weights sum to 1). A step then costs one product for the scores
of every head, one softmax and one product for the output, with the residual added by the same
call: three operator calls instead of two projections, the attention and their reshapes. The
result equals the unfolded one up to float32 rounding, not bit for bit. The folded keys and values
are (N, H * S, D), H times the memory's (N, S, D) each: worth it for the few sentences of an
interactive request (where each operator call costs more than its arithmetic), not for a large
batch, where the unfolded path reads less (``fold_max_sentences`` of
:mod:`transformer.decoding.thresholds`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.model.multi_head_attention import MultiHeadAttention


@dataclass(frozen=True)
class FoldedWeights:
    """A cross-attention layer's projections arranged for folding, made once per decoder."""

    query: Tensor  # (H, Dh, D + 1): W^Q_h / sqrt(Dh) with b^Q_h / sqrt(Dh) as the last column
    output: Tensor  # (H, Dh, D): W^O_h^T
    output_bias: Tensor  # (D,): b^O / H


@dataclass(frozen=True)
class FoldedMemory:
    """One search's folded cross-attention keys and values of one layer."""

    key: Tensor  # (N, H * S, D): head-major
    bias: Tensor  # (N, 1, H * S): b^Q_h . k_hs / sqrt(Dh), the smallest float where s is padding
    value: Tensor  # (N, H * S, D)

    def select(self, keep: Tensor) -> FoldedMemory:
        """The sentences ``keep`` (N',)."""
        return FoldedMemory(self.key.index_select(0, keep), self.bias.index_select(0, keep),
                            self.value.index_select(0, keep))


def folded_weights(attn: MultiHeadAttention) -> FoldedWeights:
    """``attn``'s (a cross-attention layer's) query and output projections, arranged for folding."""
    if not attn.cross:
        raise ValueError("folded_weights takes a cross-attention layer")
    h, dh = attn.num_heads, attn.head_dim
    d = h * dh
    scale = 1.0 / math.sqrt(dh)
    with torch.no_grad():
        w_q, b_q = attn.q_proj.weight.detach(), attn.q_proj.bias.detach()  # (D, D) out x in, (D,)
        query = torch.cat([w_q, b_q[:, None]], dim=1).mul(scale).view(h, dh, d + 1)
        output = attn.out_proj.weight.detach().t().contiguous().view(h, dh, d)  # (H, Dh, D)
        output_bias = attn.out_proj.bias.detach() / h
    return FoldedWeights(query, output, output_bias)


def fold_memory(weights: FoldedWeights, key: Tensor, value: Tensor, mask: Tensor | None) -> FoldedMemory:
    """Fold ``weights`` into one layer's memory keys/values ``key``/``value`` (N, H, S, Dh), the
    projected memory with its biases; ``mask`` (N, 1, 1, S) boolean, True = may attend, or None."""
    n, h, s, _ = key.shape
    d = weights.output.size(-1)
    keys = key @ weights.query  # (N, H, S, D + 1)
    bias = keys[..., d]  # (N, H, S)
    if mask is not None:
        bias = bias.masked_fill(~mask.view(n, 1, s), torch.finfo(bias.dtype).min)
    values = (value @ weights.output).add_(weights.output_bias)  # (N, H, S, D)
    return FoldedMemory(
        key=keys[..., :d].reshape(n, h * s, d),  # a copy: contiguous rows for the product
        bias=bias.reshape(n, 1, h * s),
        value=values.view(n, h * s, d),
    )


def folded_cross_attention(x: Tensor, residual: Tensor, memory: FoldedMemory, *, heads: int) -> Tensor:
    """``residual + cross_attention(x)``: ``x`` and ``residual`` (R, D), R = N * G rows with the
    G rows of a sentence consecutive. Returns (R, D)."""
    r, d = x.shape
    n = memory.key.size(0)
    g = r // n
    scores = torch.baddbmm(memory.bias, x.view(n, g, d), memory.key.transpose(1, 2))  # (N, G, H * S)
    weights = scores.view(n, g, heads, -1).softmax(dim=-1).view(n, g, -1)  # over each head's S keys
    return torch.baddbmm(residual.view(n, g, d), weights, memory.value).view(r, d)  # (R, D)
