"""The one padding helper: right-padding, empty rows, the minimum width."""

from __future__ import annotations

import torch

from transformer.data.padding import pad_rows


def test_rows_are_right_padded_to_the_longest():
    out = pad_rows([[5, 6, 7], [8], []], pad_id=0)
    assert out.dtype == torch.long
    assert out.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]]


def test_no_rows_or_only_empty_rows_keep_the_minimum_width():
    assert pad_rows([], pad_id=0).shape == (0, 1)
    assert pad_rows([[], []], pad_id=9).tolist() == [[9], [9]]
    assert pad_rows([[1]], pad_id=0, min_width=3).tolist() == [[1, 0, 0]]
