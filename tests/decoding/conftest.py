"""Models for the decoding tests: random tiny Transformers and one trained briefly on a copy task,
so that its outputs stop at EOS at different lengths (a random model rarely emits EOS)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.decoding.thresholds import DecodingThresholds

# the copy task of tests/conftest.py (copy_model, sources)
PAD, BOS, EOS = 0, 2, 3
VOCAB = 16  # ids 4 .. 15 are words


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
