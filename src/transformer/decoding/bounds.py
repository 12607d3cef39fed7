"""What every search checks and bounds before and while it runs: the source it is given, the most
tokens each row may produce, the tokens that may not come next, and the padding cut from its output.

Shapes: B batch (sentences), V target vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer.config.decoding import MAX_LEN_STEP


def check_source(src: Tensor) -> None:
    """``src`` must be a (B, S) tensor of integer token ids with S >= 1."""
    if not isinstance(src, Tensor) or src.dim() != 2:
        raise ValueError(f"src must be a (batch, length) tensor of token ids, got {_describe(src)}")
    if src.dtype.is_floating_point or src.dtype == torch.bool or src.dtype.is_complex:
        raise ValueError(f"src must hold integer token ids, got dtype {src.dtype}")
    if src.size(1) == 0:
        raise ValueError("src has length 0; pad empty sentences to length 1 with the pad id")


def _describe(x: object) -> str:
    return f"shape {tuple(x.shape)}" if isinstance(x, Tensor) else type(x).__name__


def output_limits(
    src: Tensor,
    *,
    pad_id: int,
    max_len: int | None,
    max_len_a: float | None,
    max_len_b: int,
    model_max_len: int,
) -> Tensor:
    """The most tokens each row may produce, EOS included: (B,) long.

    ``max_len`` is an absolute cap (None: the model's ``max_len``). With ``max_len_a``, each row is
    also capped at ``floor(a * source_length + b)`` rounded up to a multiple of
    :data:`~transformer.config.decoding.MAX_LEN_STEP`
    (:func:`~transformer.config.decoding.length_limit`), where the source length counts non-pad
    tokens. No row goes beyond the model's ``max_len`` (the positions it can encode) or below 1.
    """
    if max_len is not None and (isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1):
        raise ValueError(f"max_len must be a positive integer or None, got {max_len!r}")
    if max_len_a is not None and (not math.isfinite(max_len_a) or max_len_a < 0):
        raise ValueError(f"max_len_a must be a non-negative number or None, got {max_len_a!r}")
    cap = model_max_len if max_len is None else min(max_len, model_max_len)
    if max_len_a is None:
        return torch.full((src.size(0),), cap, dtype=torch.long, device=src.device)
    src_len = (src != pad_id).sum(dim=1)  # (B,)
    limits = torch.floor(src_len.double() * max_len_a + max_len_b).long()  # (B,)
    limits = -torch.div(-limits, MAX_LEN_STEP, rounding_mode="floor") * MAX_LEN_STEP
    return limits.clamp(min=1, max=cap)


def mask_forbidden_(scores: Tensor, *, step: int, pad_id: int, eos_id: int, min_len: int) -> Tensor:
    """Forbid, in place, the tokens that may not come next: scores (..., V) -> the same tensor.

    PAD is never produced: it is not a word, and a PAD inside a prefix would be masked out when the
    prefix is recomputed but not when it sits in the cache, so cached and uncached decoding would
    part ways. EOS is forbidden while fewer than ``min_len`` tokens have been produced.
    """
    scores[..., pad_id] = -math.inf
    if step < min_len:
        scores[..., eos_id] = -math.inf
    return scores


def strip_padding(rows: list[list[int]], *, pad_id: int) -> list[list[int]]:
    """Cut each list of ids at its first ``pad_id`` (decoders never produce PAD as a token)."""
    out = []
    for row in rows:
        try:
            out.append(row[: row.index(pad_id)])
        except ValueError:
            out.append(row)
    return out
