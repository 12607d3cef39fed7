"""Multi-head attention (section 3.2.2 of the paper).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Shapes: B batch, T query length, S key/memory length, D d_model, H heads, Dh = D / H,
G rows of ``x`` per row of the memory (1, or the beam size in beam search).
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer.model.attention import attention, attention_over_slots
from transformer.model.kv_cache import KVCache


class MultiHeadAttention(nn.Module):
    """Self-attention (one fused Q/K/V projection) or cross-attention (Q from the decoder, one fused
    K/V projection of the encoder memory), followed by the output projection W^O.

    With a ``cache``, self-attention appends this step's keys/values to it and attends over all of
    them; cross-attention projects the memory once, on the first step, and reuses it afterwards.

    Cross-attention's memory may have fewer rows than ``x``: B = G * B' rows of ``x`` against B'
    rows of memory, each memory row shared by G consecutive rows of ``x`` (the beams of one
    sentence in beam search). The G rows' queries then attend together, as G * T queries of one
    row, so the memory's keys and values are neither copied G times nor read G times.
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

    def _split(self, x: Tensor, parts: int) -> tuple[Tensor, ...]:
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
        """Attend ``x`` (B, T, D) to itself, or to ``memory`` (B', S, D) for cross-attention
        (B = G * B', G >= 1: see the class docstring).

        ``mask`` is boolean, True = may attend, broadcastable to (B, H, T, keys); for cross-attention
        to (B', H, 1, S) when G > 1. Returns the output (B, T, D) and, with ``need_weights``, the
        weights (B, H, T, keys).
        """
        b, t, d = x.shape
        dropout_p = self.dropout if self.training else 0.0
        over_slots = False  # one step of beam search through a grouped cache (kv_cache docstring)
        if self.cross:
            if memory is None and (cache is None or cache.is_empty):
                raise ValueError("cross-attention needs memory (or a filled cache)")
            (q,) = self._split(self.q_proj(x), 1)  # (B, H, T, Dh)
            if cache is not None and not cache.is_empty:
                k, v = cache.key, cache.value  # (B', H, S, Dh)
            else:
                assert memory is not None
                k, v = self._split(self.kv_proj(memory), 2)  # (B', H, S, Dh) each
                if cache is not None:
                    cache.update(k, v)
            groups = shared_memory_groups(b, k.size(0), mask)
        else:
            q, k, v = self._split(self.qkv_proj(x), 3)  # (B, H, T, Dh) each
            if cache is not None:
                over_slots = (cache.groups > 1 and t == 1 and mask is None and not need_weights
                              and dropout_p == 0.0)
                if over_slots:
                    cache.append(k, v)
                else:
                    k, v = cache.update(k, v)  # (B, H, cached + T, Dh)
            groups = cache.groups if over_slots else 1

        q = fold_groups(q, groups)  # (B', H, G * T, Dh)
        if over_slots:
            assert cache is not None
            out, weights = attention_over_slots(q, *cache.grouped()), None  # (N, H, G, Dh)
        else:
            out, weights = attention(q, k, v, mask, dropout_p=dropout_p, need_weights=need_weights)
        out = unfold_groups(out, groups)  # (B, H, T, Dh)
        weights = unfold_groups(weights, groups) if weights is not None else None
        out = out.transpose(1, 2).reshape(b, t, d)  # (B, T, H, Dh) -> (B, T, D): concat heads
        return self.out_proj(out), weights


def shared_memory_groups(rows: int, memory_rows: int, mask: Tensor | None) -> int:
    """G, the rows of the queries per row of the memory; checks that the memory mask allows it."""
    if memory_rows == rows:
        return 1
    if memory_rows == 0 or rows % memory_rows != 0:
        raise ValueError(f"{rows} query rows cannot share {memory_rows} memory rows evenly")
    if mask is not None and mask.size(-2) != 1:
        raise ValueError("a memory shared by several query rows needs a mask that is the same for every query")
    return rows // memory_rows


def fold_groups(x: Tensor, groups: int) -> Tensor:
    """(G * B', H, T, X) -> (B', H, G * T, X): each run of G rows becomes one row of G * T."""
    if groups == 1:
        return x
    rows, h, t, last = x.shape
    x = x.view(rows // groups, groups, h, t, last).transpose(1, 2)  # (B', H, G, T, X)
    return x.reshape(rows // groups, h, groups * t, last)


def unfold_groups(x: Tensor, groups: int) -> Tensor:
    """The inverse of :func:`fold_groups`: (B', H, G * T, X) -> (G * B', H, T, X)."""
    if groups == 1:
        return x
    rows, h, gt, last = x.shape
    x = x.view(rows, h, groups, gt // groups, last).transpose(1, 2)  # (B', G, H, T, X)
    return x.reshape(rows * groups, h, gt // groups, last)
