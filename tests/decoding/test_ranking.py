"""Helpers shared by greedy and beam search."""

from __future__ import annotations

import math

import pytest
import torch

from transformer.decoding.ranking import argmax_rows, vocabulary_chunk


@pytest.mark.parametrize("rows", [1, 3, 16])
def test_argmax_rows_is_torch_argmax(rows):
    """In two rounds or one, the first maximum of every row, as torch.argmax: ties across and
    within chunks, rows all -inf, NaN (which argmax takes for the maximum)."""
    g = torch.Generator().manual_seed(rows)
    v = 8000
    chunk = vocabulary_chunk(v)
    scores = torch.randint(0, 50, (rows, v), generator=g).float()  # many ties
    scores[0, :] = -math.inf
    if rows > 1:
        scores[1, 4321] = math.nan
        scores[1, 7999] = math.nan
    for c in (chunk, None):
        assert torch.equal(argmax_rows(scores, c), scores.argmax(dim=-1))
    spread = torch.randn(rows, v, generator=g)
    assert torch.equal(argmax_rows(spread, chunk), spread.argmax(dim=-1))
