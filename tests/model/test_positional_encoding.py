"""Positional encodings: the paper's formula, offsets for incremental decoding, length limits."""

from __future__ import annotations

import math

import pytest
import torch

from transformer.model.positional_encoding import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    sinusoidal_table,
)


def test_table_matches_the_formula_of_section_3_5():
    d_model, table = 16, sinusoidal_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_odd_width_is_supported():
    assert sinusoidal_table(10, 7).shape == (10, 7)


@pytest.mark.parametrize("cls", [SinusoidalPositionalEncoding, LearnedPositionalEncoding])
def test_offset_continues_the_sequence_and_long_input_is_refused(cls):
    pe = cls(d_model=8, max_len=12)
    x = torch.zeros(2, 10, 8)
    whole = pe(x)
    torch.testing.assert_close(pe(x[:, 6:], offset=6), whole[:, 6:])
    with pytest.raises(ValueError, match="max_len=12"):
        pe(torch.zeros(1, 13, 8))


def test_sinusoidal_table_is_not_saved_with_the_weights():
    assert "table" not in SinusoidalPositionalEncoding(d_model=8, max_len=12).state_dict()
