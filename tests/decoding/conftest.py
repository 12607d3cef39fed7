"""Models for the decoding tests: random tiny Transformers and one trained briefly on a copy task,
so that its outputs stop at EOS at different lengths (a random model rarely emits EOS)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.decoding.thresholds import DecodingThresholds

PAD, BOS, EOS = 0, 2, 3
VOCAB = 16  # ids 4 .. 15 are words


def padded_sources(seed: int, count: int, *, min_len: int = 1, max_len: int = 8) -> torch.Tensor:
    """``count`` random sentences of words, right-padded: (count, max_len) with at least one row
    of every length between ``min_len`` and ``max_len`` when ``count`` allows it."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((count, max_len), PAD, dtype=torch.long)
    for i in range(count):
        length = min_len + (i % (max_len - min_len + 1))
        src[i, :length] = torch.randint(4, VOCAB, (length,), generator=g)
    return src[torch.randperm(count, generator=g)]


@pytest.fixture(scope="session")
def sources() -> Callable[..., torch.Tensor]:
    return padded_sources


@pytest.fixture(scope="session")
def copy_model() -> Transformer:
    """A tiny model trained for a few dozen steps to copy its source: it has learned to stop, but
    not perfectly, so outputs vary in length and beam search differs from greedy."""
    torch.manual_seed(1234)
    config = ModelConfig.tiny(vocab_size=VOCAB, dropout=0.0, max_len=32)
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(50):
        src = padded_sources(10_000 + step, 32, min_len=2)
        lengths = (src != PAD).sum(dim=1)
        tgt = torch.full((32, src.size(1) + 2), PAD, dtype=torch.long)
        tgt[:, 0] = BOS
        tgt[:, 1 : 1 + src.size(1)] = src
        tgt[torch.arange(32), lengths + 1] = EOS
        logits = model(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.fixture(scope="session")
def random_model() -> Callable[..., Transformer]:
    """Random tiny models of several shapes: ``random_model(seed)``."""
    variants = [
        {},
        {"norm_first": True},
        {"positional": "learned", "tie_embeddings": True},
        {"activation": "gelu", "share_embeddings": True},
    ]

    def build(seed: int) -> Transformer:
        torch.manual_seed(seed)
        config = ModelConfig.tiny(vocab_size=VOCAB, max_len=24, **variants[seed % len(variants)])
        model = Transformer(config)
        with torch.no_grad():  # make EOS likely enough that some rows stop early
            model.output_projection.bias[EOS] = 0.5
        return model

    return build


@pytest.fixture
def use_thresholds(monkeypatch) -> Callable[..., DecodingThresholds]:
    """``use_thresholds(**changes)``: this machine's decoding crossovers with ``changes`` (and
    those of earlier calls in the test), made what every decoder and kernel of the test takes by
    default; returns them."""
    from transformer.decoding import thresholds

    def use(**changes: int) -> DecodingThresholds:
        chosen = dataclasses.replace(thresholds.decoding_thresholds(), **changes)
        monkeypatch.setattr(thresholds, "decoding_thresholds", lambda: chosen)
        return chosen

    return use


@pytest.fixture
def fast_kernels_from_one_row(use_thresholds):
    """The packed and int8 products for every row count and weight size (tiny models and batches
    would otherwise take plain ``F.linear``), so tests exercise them."""
    use_thresholds(pack_min_work=1, pack_min_work_big=1, pack_min_rows_big=1, int8_min_work=1)


@pytest.fixture(scope="session")
def distinct_norms() -> Callable[[Transformer], Transformer]:
    """``distinct_norms(model)``: the model with random layer-norm gains and biases, in evaluation
    mode, so that using the wrong norm shows."""

    def distinct(model: Transformer) -> Transformer:
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, torch.nn.LayerNorm):
                    module.weight.copy_(1 + 0.5 * torch.randn(module.weight.shape, generator=g))
                    module.bias.copy_(0.5 * torch.randn(module.bias.shape, generator=g))
        return model.eval()

    return distinct
