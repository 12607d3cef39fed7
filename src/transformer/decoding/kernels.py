"""Attention kernels of the decoding fast path (:mod:`transformer.decoding.fast_decoder`).

Shapes: N sentences, G rows (beams) per sentence, H heads, Lq queries, L / Lk keys, Dh head
dimension.

Each computes equation (1) of the paper as :func:`transformer.model.attention` does, arranged for
one cached decoding step: the kernel that is fastest for a single query on a CPU, the G beams of
a sentence reading its one memory row together, and attention through beam search's slot table.
Tests check each against the reference (tests/decoding/test_kernels.py).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer.decoding import thresholds as _thresholds
from transformer.decoding.thresholds import DecodingThresholds
from transformer.model.attention import attention

# One query a row against more keys than ``single_query_keys``, in a batch of at least
# ``single_query_rows`` rows (a cached greedy step of a batch), is faster on a CPU as spelled-out
# matmuls than through SDPA's fused kernel; at a few rows SDPA is 2-3x faster. Where the two
# cross depends on the CPU (transformer.decoding.thresholds; benchmarks/decoding.py --suite
# kernels: on Zen 4 4x at 100 keys, batch 80, 4 heads, equal near 30 keys and near 16 rows).


def step_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, *,
                   thresholds: DecodingThresholds | None = None) -> Tensor:
    """:func:`transformer.model.attention` without weights, ``query`` (B, H, Lq, Dh) against
    ``key``/``value`` (B, H, Lk, Dh) -> (B, H, Lq, Dh), taking the spelled-out matmuls (the
    reference's weights path) for one query against many keys in a large batch on a CPU
    (``thresholds``' crossover; None: this machine's)."""
    t = _thresholds.decoding_thresholds() if thresholds is None else thresholds
    spelled_out = (query.device.type == "cpu" and query.size(-2) == 1
                   and key.size(-2) > t.single_query_keys
                   and query.size(0) >= t.single_query_rows)
    return attention(query, key, value, mask, need_weights=spelled_out)[0]


def fold_groups(x: Tensor, groups: int) -> Tensor:
    """(G * N, H, T, X) -> (N, H, G * T, X): each run of G rows becomes one row of G * T, so the G
    beams of a sentence attend to its one memory row together (keys neither copied nor re-read)."""
    if groups == 1:
        return x
    rows, h, t, last = x.shape
    x = x.view(rows // groups, groups, h, t, last).transpose(1, 2)  # (N, H, G, T, X)
    return x.reshape(rows // groups, h, groups * t, last)


def unfold_groups(x: Tensor, groups: int) -> Tensor:
    """The inverse of :func:`fold_groups`: (N, H, G * T, X) -> (G * N, H, T, X)."""
    if groups == 1:
        return x
    rows, h, gt, last = x.shape
    x = x.view(rows, h, groups, gt // groups, last).transpose(1, 2)  # (N, G, H, T, X)
    return x.reshape(rows * groups, h, gt // groups, last)


def attention_over_slots(query: Tensor, key: Tensor, value: Tensor, slots: Tensor) -> Tensor:
    """Attention of G queries that each take, at every key position, one of G stored keys.

    ``query`` (N, H, G, Dh): one query per beam of each of N sentences; ``key``/``value``
    (N, H, L * G, Dh): the keys of the sentence's G slots at each of L positions, position-major;
    ``slots`` (N, G, L) long: the slot that holds beam g's key at position p. Beam g attends to
    ``key[n, :, p * G + slots[n, g, p]]`` for p < L, nothing else (the layout of a
    :class:`transformer.decoding.slot_cache.SlotCache`, where beam search moves slot numbers
    instead of keys). Returns (N, H, G, Dh). Every key is read once for all G beams; the G x G
    products that no beam uses are cheap next to moving the keys.
    """
    n, h, g, dh = query.shape
    length = slots.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(dh)  # (N, H, G, L * G)
    positions = torch.arange(length, device=slots.device) * g  # (L,)
    index = (positions + slots)[:, None].expand(n, h, g, length)  # (N, H, G, L)
    weights = scores.gather(-1, index).softmax(dim=-1)  # (N, H, G, L)
    spread = torch.zeros_like(scores).scatter_(-1, index, weights)  # (N, H, G, L * G)
    return spread @ value  # (N, H, G, Dh)
