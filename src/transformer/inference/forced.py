"""Teacher-forced passes over ``(source ids, target ids)`` pairs, batched as training batches them:
what forced-decoding scores (:mod:`~transformer.inference.scoring`) and the cross-attention of
alignments (:mod:`~transformer.inference.alignment`) share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from transformer.data.token_batch_sampler import TokenBatchSampler


@contextmanager
def forced_batches(model: nn.Module, items: Sequence[tuple[Sequence[int], Sequence[int]]], *,
                   max_tokens: int) -> Iterator[tuple[torch.device, TokenBatchSampler]]:
    """The model's device and the batches of ``items`` (lists of indices into it, sorted by
    length, at most ``max_tokens`` padded positions each, every item once), with the model in
    evaluation mode (dropout off) inside the block and its mode restored after."""
    was_training = model.training
    model.eval()
    try:
        yield next(model.parameters()).device, TokenBatchSampler(
            [(len(s), len(t)) for s, t in items], max_tokens=max_tokens, shuffle=False)
    finally:
        model.train(was_training)
