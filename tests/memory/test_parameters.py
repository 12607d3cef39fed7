"""Parameter counts from the configuration equal those of the built models."""

from __future__ import annotations

import pytest

from transformer import ModelConfig, Transformer, TransformerClassifier
from transformer.memory import TrainingStep, estimate_training_memory, parameter_count

TRANSLATION_VARIANTS = {
    "tiny": {},
    "shared": {"share_embeddings": True},
    "tied": {"tie_embeddings": True},
    "shared+tied": {"share_embeddings": True, "tie_embeddings": True},
    "pre-LN, learned, gelu": {"norm_first": True, "positional": "learned", "activation": "gelu"},
    "two vocabularies": {"src_vocab_size": 123, "tgt_vocab_size": 77},
    "tied, two vocabularies, 1+3 layers": {"src_vocab_size": 50, "tgt_vocab_size": 90,
                                           "tie_embeddings": True, "num_encoder_layers": 1,
                                           "num_decoder_layers": 3},
}


@pytest.mark.parametrize("overrides", TRANSLATION_VARIANTS.values(), ids=TRANSLATION_VARIANTS)
def test_parameter_count_equals_the_built_translation_model(overrides):
    config = ModelConfig.tiny(vocab_size=100, **overrides)
    model = Transformer(config)
    assert parameter_count(config) == sum(p.numel() for p in model.parameters())
    estimate = estimate_training_memory(config, TrainingStep(batch_size=2, src_len=5), device="cpu")
    assert estimate.parameters == sum(p.numel() for p in model.parameters())
    assert estimate.line("parameters").bytes == 4 * estimate.parameters


@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("overrides", [{}, {"norm_first": True, "positional": "learned"}])
@pytest.mark.parametrize("num_labels", [1, 28])
def test_parameter_count_equals_the_built_classifier(pooling, overrides, num_labels):
    config = ModelConfig.tiny(vocab_size=300, **overrides)
    model = TransformerClassifier(config, num_labels=num_labels, pooling=pooling)
    expected = sum(p.numel() for p in model.parameters())
    assert parameter_count(config, encoder_only=True, num_labels=num_labels,
                           pooling=pooling) == expected
