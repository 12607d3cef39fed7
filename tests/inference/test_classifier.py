"""Classifier inference: batched logits in input order, probabilities per task kind."""

from __future__ import annotations

import torch

from transformer import ModelConfig, TransformerClassifier
from transformer.inference.classifier import predict_logits, probabilities

VOCAB, PAD = 24, 0


def tiny_classifier(num_labels: int, *, multi_label: bool) -> TransformerClassifier:
    cfg = ModelConfig.tiny(VOCAB, d_model=32, num_heads=4, d_ff=64, num_encoder_layers=1,
                           num_decoder_layers=0, dropout=0.0, max_len=32)
    return TransformerClassifier(cfg, num_labels=num_labels, multi_label=multi_label)


def test_predict_logits_keeps_input_order_and_handles_empty_rows():
    model = tiny_classifier(3, multi_label=False).eval()
    ids = [[4, 5, 6, 7], [], [8], [9, 10]]
    batched = predict_logits(model, ids, batch_tokens=4, max_sentences=2)
    for i, row in enumerate(ids):
        alone = model(torch.tensor([row or [PAD]]))
        torch.testing.assert_close(batched[i], alone[0], atol=1e-5, rtol=1e-5)
    assert torch.isfinite(batched).all()


def test_probabilities_are_softmax_or_per_label_sigmoid():
    logits = torch.randn(5, 3)
    torch.testing.assert_close(probabilities(logits, multi_label=False), logits.softmax(-1))
    torch.testing.assert_close(probabilities(logits, multi_label=True), logits.sigmoid())
