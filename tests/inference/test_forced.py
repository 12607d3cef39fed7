"""forced_batches: what scoring and alignment share: every pair in one batch within the budget,
the model in evaluation mode inside and its mode restored after, even when the block raises."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer.inference.forced import forced_batches


def test_every_pair_once_within_the_budget_in_evaluation_mode():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train()
    items = [([1] * n, [2] * (n + 1)) for n in (5, 1, 3, 2, 4, 1)]
    seen = []
    with forced_batches(model, items, max_tokens=12) as (device, batches):
        assert device == torch.device("cpu")
        for indices in batches:
            assert not model.training and not model[1].training
            width = max(max(len(items[i][0]), len(items[i][1])) for i in indices)
            assert len(indices) * width <= 12
            seen += indices
    assert sorted(seen) == list(range(len(items)))
    assert model.training and model[1].training


@pytest.mark.parametrize("mode", [True, False])
def test_the_mode_is_restored_when_the_block_raises(mode):
    model = nn.Sequential(nn.Linear(2, 2)).train(mode)
    with pytest.raises(RuntimeError), forced_batches(model, [([1], [2])], max_tokens=8):
        raise RuntimeError("a failed batch")
    assert model.training is mode
