"""Collation: the padded layout of translation batches, and sources padded as training pads them."""

from __future__ import annotations

import pytest
import torch

from transformer.data.collation import collate_pairs, collate_sources
from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


def test_collate_pairs_layout() -> None:
    batch = collate_pairs([([5, 6, 7], [8]), ([9], [10, 11, 12])])
    assert batch.src.tolist() == [[5, 6, 7], [9, PAD_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, PAD_ID, PAD_ID], [BOS_ID, 10, 11, 12]]
    assert batch.tgt_out.tolist() == [[8, EOS_ID, PAD_ID, PAD_ID], [10, 11, 12, EOS_ID]]
    assert (batch.num_src_tokens, batch.num_tgt_tokens) == (4, 6)
    assert batch.num_tgt_tokens == int((batch.tgt_out != PAD_ID).sum())
    assert batch.src.dtype == batch.tgt_in.dtype == torch.long and len(batch) == 2


def test_collate_sources_matches_collate_pairs() -> None:
    pairs = [([5, 6, 7], [8]), ([9], [10])]
    assert torch.equal(collate_sources([s for s, _ in pairs]), collate_pairs(pairs).src)
    with pytest.raises(ValueError):
        collate_pairs([])
