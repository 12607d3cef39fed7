"""The report: decimal byte units, one line per term, and the measured peak beside the estimate."""

from __future__ import annotations

from transformer import ModelConfig
from transformer.memory import (
    MeasuredPeak,
    TrainingStep,
    estimate_training_memory,
    format_bytes,
    format_report,
    seed_formula_estimate,
)


def test_format_bytes_uses_decimal_units():
    assert format_bytes(27.5e9) == "27.50 GB"
    assert format_bytes(1_500_000) == "1.50 MB"
    assert format_bytes(1000) == "1.00 kB"
    assert format_bytes(999) == "999 B"


def test_report_marks_the_peak_terms_and_compares_with_the_measurement():
    estimate = estimate_training_memory(ModelConfig.tiny(vocab_size=1000),
                                        TrainingStep(batch_size=8, src_len=20), device="cpu")
    measured = MeasuredPeak(estimate.peak_bytes // 2, {"forward": 1}, "cpu", "a method")
    text = format_report(estimate, measured)
    for line in estimate.lines:
        row = next(r for r in text.splitlines() if r[3:].startswith(line.name + " "))
        assert row.startswith(" *" if line.name in estimate.peak_terms else "  ")
        assert format_bytes(line.bytes) in row
    peak = next(r for r in text.splitlines() if r.strip().startswith("peak (estimate)"))
    assert format_bytes(estimate.peak_bytes) in peak and estimate.peak_phase in peak
    assert "a method on cpu; estimate/measured = 2.000" in text
    assert "peak (measured)" not in format_report(estimate)


def test_report_of_the_seed_formula_names_the_decoder_only_setting():
    estimate = seed_formula_estimate(num_layers=12, num_heads=12, d_model=768, vocab_size=50257,
                                     batch_size=8, seq_len=1024)
    text = format_report(estimate)
    assert "decoder-only (seed formula): 12 layers, d_model=768, 12 heads, d_ff=3072" in text
    assert "batch 8 x 1024 tokens, 4 bytes per value, Adam" in text
    assert "26.68 GB" in text
