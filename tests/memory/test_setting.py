"""The check of a TrainingStep, shared by the estimate and the measurement, and the rows of a token
budget."""

from __future__ import annotations

import pytest

from transformer import ModelConfig
from transformer.memory import (
    TrainingStep,
    batch_for_tokens,
    estimate_training_memory,
    measure_training_peak,
)


def test_bad_arguments_name_the_value():
    config = ModelConfig.tiny(vocab_size=100)
    with pytest.raises(ValueError, match="precision"):
        estimate_training_memory(config, TrainingStep(batch_size=2, src_len=4, precision="fp8"))
    with pytest.raises(ValueError, match="batch_size"):
        estimate_training_memory(config, TrainingStep(batch_size=0, src_len=4))
    with pytest.raises(ValueError, match="max_len=128"):
        estimate_training_memory(config, TrainingStep(batch_size=2, src_len=4, tgt_len=129))
    with pytest.raises(ValueError, match="fp16"):
        measure_training_peak(config, TrainingStep(batch_size=2, src_len=4, precision="fp16"),
                              device="cpu")


def test_batch_for_tokens_counts_like_the_token_sampler():
    assert batch_for_tokens(4096, src_len=63, tgt_len=64) == 64  # width max(63 + 1, 64)
    assert batch_for_tokens(4096, src_len=64, tgt_len=None) == 4096 // 65
    assert batch_for_tokens(4096, src_len=128, tgt_len=None, encoder_only=True) == 32
    with pytest.raises(ValueError, match="max_tokens=10"):
        batch_for_tokens(10, src_len=64, tgt_len=64)


@pytest.mark.parametrize("bad, fragment", [
    ({"precision": "fp8"}, "precision"),
    ({"pooling": "max"}, "pooling"),
    ({"src_len": 0}, "src_len"),
    ({"src_len": 128, "encoder_only": True, "pooling": "cls"}, "max_len=127"),
])
def test_estimate_and_measurement_reject_the_same_arguments(bad, fragment):
    config = ModelConfig.tiny(vocab_size=100)
    step = TrainingStep(**{"batch_size": 2, "src_len": 4, **bad})
    for function in (estimate_training_memory, measure_training_peak):
        with pytest.raises(ValueError, match=fragment):
            function(config, step, device="cpu")
