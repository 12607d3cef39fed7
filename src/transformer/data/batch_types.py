"""The padded batches that the data pipeline hands to training and evaluation, one per task.

Shapes: B sentences (or texts), S source (or text) length, T target length (with BOS or EOS),
C labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Batch:
    """One batch of sentence pairs, right-padded with the pad id.

    ``tgt_in`` is BOS + target and ``tgt_out`` is target + EOS, so ``model(src, tgt_in)`` predicts
    ``tgt_out`` position by position.
    """

    src: Tensor  # (B, S) long
    tgt_in: Tensor  # (B, T) long
    tgt_out: Tensor  # (B, T) long
    num_src_tokens: int  # non-pad tokens in src
    num_tgt_tokens: int  # non-pad tokens in tgt_out: the loss normaliser

    def __len__(self) -> int:
        return self.src.size(0)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(
            self.src.to(device, non_blocking=True),
            self.tgt_in.to(device, non_blocking=True),
            self.tgt_out.to(device, non_blocking=True),
            self.num_src_tokens,
            self.num_tgt_tokens,
        )


@dataclass
class ClassificationBatch:
    """Padded token ids and their targets."""

    tokens: Tensor  # (B, S) long, right-padded with the pad id
    targets: Tensor  # (B,) long class ids, or (B, C) float 0/1 for multi-label

    def __len__(self) -> int:
        return self.tokens.size(0)

    def to(self, device: torch.device | str) -> ClassificationBatch:
        return ClassificationBatch(
            self.tokens.to(device, non_blocking=True), self.targets.to(device, non_blocking=True)
        )
