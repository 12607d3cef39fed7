"""The encoder-only classifier: shapes, padding invariance of the pooled representation, no NaN."""

from __future__ import annotations

import pytest
import torch

from transformer import ModelConfig, TransformerClassifier

PAD, VOCAB = 0, 30


def classifier(pooling: str, **kw) -> TransformerClassifier:
    cfg = ModelConfig.tiny(VOCAB, dropout=0.0, num_decoder_layers=0)
    return TransformerClassifier(cfg, num_labels=5, pooling=pooling, **kw).eval()


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_logits_shape_and_padding_invariance(pooling):
    model = classifier(pooling)
    tokens = torch.randint(3, VOCAB, (4, 7))
    logits = model(tokens)
    assert logits.shape == (4, 5)
    padded = torch.cat([tokens, torch.full((4, 5), PAD)], dim=1)
    torch.testing.assert_close(model(padded), logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_all_padding_row_is_finite_and_leaves_others_alone(pooling):
    model = classifier(pooling)
    tokens = torch.randint(3, VOCAB, (2, 6))
    tokens[1] = PAD
    out = model(tokens, return_attention=True)
    assert torch.isfinite(out.logits).all()
    torch.testing.assert_close(out.logits[:1], model(tokens[:1]), atol=1e-5, rtol=1e-5)
    extra = 1 if pooling == "cls" else 0
    assert [w.shape for w in out.attention.encoder] == [(2, 4, 6 + extra, 6 + extra)] * 2


def test_mean_pooling_averages_over_real_tokens_only():
    model = classifier("mean")
    tokens = torch.tensor([[5, 6, 7, PAD, PAD]])
    hidden, _ = model.encoder(model.embed(tokens), mask=(tokens != PAD)[:, None, None, :])
    expected = model.head(hidden[:, :3].mean(1))
    torch.testing.assert_close(model(tokens), expected, atol=1e-6, rtol=1e-5)


def test_cls_pooling_takes_one_position_of_the_budget():
    assert classifier("cls").max_tokens == classifier("mean").max_tokens - 1


def test_bad_arguments():
    cfg = ModelConfig.tiny(VOCAB)
    with pytest.raises(ValueError, match="num_labels"):
        TransformerClassifier(cfg, num_labels=0)
    with pytest.raises(ValueError, match="pooling"):
        TransformerClassifier(cfg, num_labels=2, pooling="max")
