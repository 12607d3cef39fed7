"""memory_job: what the memory verb asks, equal to calling the estimate, the seed formula and the
batch rule directly."""

from __future__ import annotations

import pytest

from transformer import ModelConfig
from transformer.memory import (
    TrainingStep,
    batch_for_tokens,
    estimate_training_memory,
    memory_job,
    seed_formula_estimate,
)


def test_a_token_budget_sets_the_rows_of_the_estimate():
    config = ModelConfig.tiny(vocab_size=300)
    result = memory_job(config, TrainingStep(batch_size=3, src_len=12, tgt_len=13), max_tokens=400)
    rows = batch_for_tokens(400, src_len=12, tgt_len=13)
    assert rows != 3
    direct = estimate_training_memory(config, TrainingStep(batch_size=rows, src_len=12, tgt_len=13,
                                                           precision="fp32"), device="cpu")
    assert result.estimate.to_dict() == direct.to_dict()
    assert result.measured is None and "measured" not in result.to_dict()


def test_decoder_only_is_the_seed_formula_with_gpt2_width():
    config = ModelConfig.base(vocab_size=50257, num_decoder_layers=12, num_heads=12, d_model=768)
    result = memory_job(config, TrainingStep(batch_size=8, src_len=64, tgt_len=1024), decoder_only=True)
    direct = seed_formula_estimate(num_layers=12, num_heads=12, d_model=768, d_ff=4 * 768,
                                   vocab_size=50257, batch_size=8, seq_len=1024, bytes_per_value=4)
    assert result.estimate.to_dict() == direct.to_dict()
    half = memory_job(config, TrainingStep(batch_size=8, src_len=1024, precision="bf16"),
                      decoder_only=True, decoder_only_d_ff=1000)
    assert half.estimate.to_dict() == seed_formula_estimate(
        num_layers=12, num_heads=12, d_model=768, d_ff=1000, vocab_size=50257, batch_size=8,
        seq_len=1024, bytes_per_value=2).to_dict()


def test_decoder_only_cannot_be_measured():
    with pytest.raises(ValueError, match="--decoder-only"):
        memory_job(ModelConfig.tiny(vocab_size=300), TrainingStep(batch_size=2, src_len=8),
                   decoder_only=True, measure=True)
