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

from transformer.hardware import detect_cpu

# bfloat16/float16 inputs on a CPU with native bf16 (bf16 autocast training) take the spelled-out
# matmuls: there the CPU flash kernel's forward + backward is 4-5x slower than matmul + softmax
# (Zen 4, torch 2.13, benchmarks/train_throughput.py). Without native bf16 the matmuls are emulated
# and the score bmm is 22x slower than in fp32 (AVX2), so SDPA's kernel is kept. This rule is here,
# not in decoding/, because it sets TRAINING speed; the choices that only matter for decoding steps
# live in transformer.decoding.kernels.
_CPU_SLOW_DTYPES = (torch.bfloat16, torch.float16)


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
    ``F.scaled_dot_product_attention`` (fused kernels; the same equation), except for
    bfloat16/float16 inputs on a CPU with native bf16, where the spelled-out matmuls are faster;
    with weights it is spelled out.
    A query whose every key is masked gets all-zero weights and a zero output (as SDPA does), so
    a row made only of padding never produces NaN. ``dropout_p`` is applied to the weights; pass
    0.0 outside training.
    """
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = may attend), got {mask.dtype}")
    if not need_weights and (query.device.type != "cpu" or query.dtype not in _CPU_SLOW_DTYPES
                             or not detect_cpu().native_bf16):
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
