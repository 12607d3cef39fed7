"""A prepared split fitted to a model's max_len: long pairs left out (and counted) on request."""

from __future__ import annotations


def test_filter_on_long_leaves_long_pairs_out(opened):
    data = opened()
    whole = data.pairs("train", max_len=10_000)
    fitted = data.pairs("train", max_len=8, on_long="filter")
    long = sum(1 for i in range(len(whole)) if len(whole[i][0]) > 8 or len(whole[i][1]) > 7)
    assert fitted.num_filtered == long > 0 and len(fitted) == len(whole) - long
    assert all(len(fitted[i][0]) <= 8 and len(fitted[i][1]) <= 7 for i in range(len(fitted)))
