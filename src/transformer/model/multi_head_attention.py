"""Multi-head attention (section 3.2.2 of the paper).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Shapes: B batch, T query length, S key/memory length, D d_model, H heads, Dh = D / H.
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer.model.attention import attention
from transformer.model.kv_cache import KVCache


class MultiHeadAttention(nn.Module):
    """Self-attention (one fused Q/K/V projection) or cross-attention (Q from the decoder, one fused
    K/V projection of the encoder memory), followed by the output projection W^O.

    With a ``cache``, self-attention appends this step's keys/values to it and attends over all of
    them; cross-attention projects the memory once, on the first step, and reuses it afterwards.
    """

    def __init__(
        self, *, d_model: int, num_heads: int, dropout: float = 0.0, cross: bool = False
    ) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        self.cross = cross
        if cross:
            self.q_proj = nn.Linear(d_model, d_model)
            self.kv_proj = nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split_heads(self, x: Tensor, parts: int) -> tuple[Tensor, ...]:
        """(B, L, parts * D) -> ``parts`` tensors of (B, H, L, Dh)."""
        b, length, _ = x.shape
        x = x.view(b, length, parts, self.num_heads, self.head_dim)  # (B, L, parts, H, Dh)
        x = x.permute(2, 0, 3, 1, 4)  # (parts, B, H, L, Dh)
        return x.unbind(0)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend ``x`` (B, T, D) to itself, or to ``memory`` (B, S, D) for cross-attention.

        ``mask`` is boolean, True = may attend, broadcastable to (B, H, T, keys). Returns the
        output (B, T, D) and, with ``need_weights``, the weights (B, H, T, keys).
        """
        b, t, d = x.shape
        if self.cross:
            if memory is None and (cache is None or cache.is_empty):
                raise ValueError("cross-attention needs memory (or a filled cache)")
            (q,) = self.split_heads(self.q_proj(x), 1)  # (B, H, T, Dh)
            if cache is not None and not cache.is_empty:
                k, v = cache.key, cache.value  # (B, H, S, Dh)
            else:
                assert memory is not None
                k, v = self.split_heads(self.kv_proj(memory), 2)  # (B, H, S, Dh) each
                if cache is not None:
                    cache.update(k, v)
        else:
            q, k, v = self.split_heads(self.qkv_proj(x), 3)  # (B, H, T, Dh) each
            if cache is not None:
                k, v = cache.update(k, v)  # (B, H, cached + T, Dh)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = attention(q, k, v, mask, dropout_p=dropout_p, need_weights=need_weights)
        out = out.transpose(1, 2).reshape(b, t, d)  # (B, T, H, Dh) -> (B, T, D): concat heads
        return self.out_proj(out), weights
