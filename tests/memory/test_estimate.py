"""The training-memory estimate: its peak is the sum of its terms, and it follows the batch,
the precision and the device."""

from __future__ import annotations

from transformer import ModelConfig
from transformer.memory import estimate_training_memory, format_report


def test_peak_is_the_sum_of_its_terms():
    estimate = estimate_training_memory(ModelConfig.tiny(vocab_size=1000), batch_size=8,
                                        src_len=20, device="cpu")
    extra = estimate.peak_extra.bytes if estimate.peak_extra else 0
    alive = sum(x.bytes for x in estimate.lines if x.name in estimate.peak_terms)
    assert alive + extra == estimate.peak_bytes
    text = format_report(estimate)
    for line in estimate.lines:
        assert line.name in text


def test_estimate_grows_with_the_batch_and_shrinks_with_autocast():
    config = ModelConfig.small(vocab_size=8000)

    def acts(**kw):
        e = estimate_training_memory(config, src_len=32, device="cuda", **{"batch_size": 8, **kw})
        return sum(x.bytes for x in e.lines if x.name.startswith("activations"))

    assert acts(batch_size=16) == 2 * acts(batch_size=8)  # no term is shared across rows
    assert acts(precision="bf16") < acts()
    assert acts(precision="fp16") == acts(precision="bf16")
    cpu = estimate_training_memory(config, batch_size=8, src_len=32, device="cpu")
    cuda = estimate_training_memory(config, batch_size=8, src_len=32, device="cuda")
    assert cuda.line("activations: encoder").bytes < cpu.line("activations: encoder").bytes
