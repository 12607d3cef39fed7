"""Scaled dot-product attention, equation (1) of the paper, as a pure function.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Shapes: B batch, H heads, Lq query length, Lk key length, Dh head dimension.
Masks are boolean and broadcast to (B, H, Lq, Lk); True means "may attend".
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

# Where the spelled-out matmuls beat SDPA's fused kernel on a CPU (torch 2.13, measured):
# - one query against more keys than this (4x at 100 keys, batch 80, 4 heads; equal near 30),
#   which is every step of cached decoding (benchmarks/decoding.py);
# - bfloat16/float16 inputs (bf16 autocast training): the CPU flash kernel's forward + backward is
#   4-5x slower than matmul + softmax there (benchmarks/train_throughput.py).
_CPU_SINGLE_QUERY_KEYS = 32
_CPU_SLOW_DTYPES = (torch.bfloat16, torch.float16)


def _use_sdpa(query: Tensor, key: Tensor) -> bool:
    if query.device.type != "cpu":
        return True
    single_query = query.size(-2) == 1 and key.size(-2) > _CPU_SINGLE_QUERY_KEYS
    return not single_query and query.dtype not in _CPU_SLOW_DTYPES


def attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Attend ``query`` (B, H, Lq, Dh) to ``key``/``value`` (B, H, Lk, Dh).

    Returns the output (B, H, Lq, Dh) and, when ``need_weights``, the attention weights
    (B, H, Lq, Lk) before dropout. Without weights the computation goes through
    ``F.scaled_dot_product_attention`` (fused kernels), except on a CPU for one query against many
    keys (a cached decoding step) and for bfloat16/float16 inputs, where the spelled-out matmuls
    are faster; with weights it is spelled out.
    A query whose every key is masked gets all-zero weights and a zero output (as SDPA does), so
    a row made only of padding never produces NaN. ``dropout_p`` is applied to the weights; pass
    0.0 outside training.
    """
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = may attend), got {mask.dtype}")
    if not need_weights and _use_sdpa(query, key):
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)
        return out, None

    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)  # over keys
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # fully masked rows: uniform -> zero
    attended = F.dropout(weights, dropout_p) if dropout_p > 0.0 else weights
    return attended @ value, weights if need_weights else None  # (B, H, Lq, Dh), (B, H, Lq, Lk)


def attention_over_slots(query: Tensor, key: Tensor, value: Tensor, slots: Tensor) -> Tensor:
    """Attention of G queries that each take, at every key position, one of G stored keys.

    ``query`` (N, H, G, Dh): one query per beam of each of N sentences; ``key``/``value``
    (N, H, L * G, Dh): the keys of the sentence's G slots at each of L positions, position-major;
    ``slots`` (N, G, L) long: the slot that holds beam g's key at position p. Beam g attends to
    ``key[n, :, p * G + slots[n, g, p]]`` for p < L, nothing else (the layout of a grouped
    :class:`transformer.model.KVCache`, where beam search moves slot numbers instead of keys).
    Returns (N, H, G, Dh). Every key is read once for all G beams; the G x G products that no
    beam uses are cheap next to moving the keys.
    """
    n, h, g, dh = query.shape
    length = slots.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(dh)  # (N, H, G, L * G)
    positions = torch.arange(length, device=slots.device) * g  # (L,)
    index = (positions + slots)[:, None].expand(n, h, g, length)  # (N, H, G, L)
    weights = scores.gather(-1, index).softmax(dim=-1)  # (N, H, G, L)
    spread = torch.zeros_like(scores).scatter_(-1, index, weights)  # (N, H, G, L * G)
    return spread @ value  # (N, H, G, Dh)
