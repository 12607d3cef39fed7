"""Small synthetic data for the training tests: a copy task of random ids, collated locally so these
tests do not depend on the data layer."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.data.batch_types import Batch

VOCAB = 16
PAD, BOS, EOS = 0, 2, 3


def make_pairs(n: int, *, seed: int = 0, min_len: int = 2, max_len: int = 7) -> list[tuple[list[int], list[int]]]:
    """``n`` (source, target) id lists where the target is the source reversed."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        src = [rng.randrange(4, VOCAB) for _ in range(rng.randint(min_len, max_len))]
        pairs.append((src, src[::-1]))
    return pairs


def collate(pairs: list[tuple[list[int], list[int]]]) -> Batch:
    """Right-padded ``Batch`` with BOS + target as input and target + EOS as output."""
    s = max(len(p[0]) for p in pairs)
    t = max(len(p[1]) for p in pairs) + 1
    src = torch.full((len(pairs), s), PAD)
    tgt_in = torch.full((len(pairs), t), PAD)
    tgt_out = torch.full((len(pairs), t), PAD)
    for i, (a, b) in enumerate(pairs):
        src[i, : len(a)] = torch.tensor(a)
        tgt_in[i, : len(b) + 1] = torch.tensor([BOS, *b])
        tgt_out[i, : len(b) + 1] = torch.tensor([*b, EOS])
    return Batch(src, tgt_in, tgt_out, int((src != PAD).sum()), int((tgt_out != PAD).sum()))


class ListData:
    """Fixed batches, reshuffled per epoch by ``seed + epoch`` (a deterministic batch order)."""

    def __init__(self, batches: list[Batch], *, seed: int = 0, shuffle: bool = True) -> None:
        self.batches, self.seed, self.shuffle = batches, seed, shuffle

    def for_epoch(self, epoch: int) -> list[Batch]:
        order = list(range(len(self.batches)))
        if self.shuffle:
            random.Random(self.seed + epoch).shuffle(order)
        return [self.batches[i] for i in order]


def tiny_model(*, dropout: float = 0.0, seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    cfg = ModelConfig.tiny(VOCAB, dropout=dropout, d_model=16, d_ff=32, num_heads=2,
                           num_encoder_layers=1, num_decoder_layers=1, max_len=32, **overrides)
    return Transformer(cfg)


@pytest.fixture
def synth() -> SimpleNamespace:
    """Helpers: make_pairs, collate, ListData, tiny_model and the special ids."""
    return SimpleNamespace(make_pairs=make_pairs, collate=collate, ListData=ListData,
                           tiny_model=tiny_model, VOCAB=VOCAB, PAD=PAD, BOS=BOS, EOS=EOS)
