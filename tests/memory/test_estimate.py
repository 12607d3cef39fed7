"""The training-memory estimate: its peak is the sum of its terms, and it follows the batch,
the precision and the device."""

from __future__ import annotations

from transformer import ModelConfig
from transformer.memory import TrainingStep, estimate_training_memory, format_report


def test_peak_is_the_sum_of_its_terms():
    estimate = estimate_training_memory(ModelConfig.tiny(vocab_size=1000),
                                        TrainingStep(batch_size=8, src_len=20), device="cpu")
    extra = estimate.peak_extra.bytes if estimate.peak_extra else 0
    alive = sum(x.bytes for x in estimate.lines if x.name in estimate.peak_terms)
    assert alive + extra == estimate.peak_bytes
    text = format_report(estimate)
    for line in estimate.lines:
        assert line.name in text


def test_estimate_grows_with_the_batch_and_shrinks_with_autocast():
    config = ModelConfig.small(vocab_size=8000)

    def acts(**kw):
        e = estimate_training_memory(config, TrainingStep(src_len=32, **{"batch_size": 8, **kw}),
                                     device="cuda")
        return sum(x.bytes for x in e.lines if x.name.startswith("activations"))

    assert acts(batch_size=16) == 2 * acts(batch_size=8)  # no term is shared across rows
    assert acts(precision="bf16") < acts()
    assert acts(precision="fp16") == acts(precision="bf16")
    cpu = estimate_training_memory(config, TrainingStep(batch_size=8, src_len=32), device="cpu")
    cuda = estimate_training_memory(config, TrainingStep(batch_size=8, src_len=32), device="cuda")
    assert cuda.line("activations: encoder").bytes < cpu.line("activations: encoder").bytes


def test_cuda_sum_staging_buffer_matches_the_allocator_trace_of_an_h200():
    """The float32 staging buffer of CUDA's sum kernel, as the caching allocator recorded it on an
    H200 (132 multiprocessors) summing bf16 bias gradients over 8,192 tokens: 16, 48 and 64 MiB
    for 256, 768 and 1,024 columns (a d256 classifier's out/FFN2, QKV and FFN1 biases). None on
    the CPU, none when the rows are too few to split across blocks."""
    from dataclasses import replace

    from transformer.memory.activations import ElementBytes, sum_staging_bytes

    h200 = replace(ElementBytes.of("bf16", "cuda"), sms=132)
    assert [sum_staging_bytes(8192, cols, h200) for cols in (256, 768, 1024)] == \
        [16 * 2**20, 48 * 2**20, 64 * 2**20]
    assert sum_staging_bytes(8192, 1024, ElementBytes.of("bf16", "cpu")) == 0
    assert sum_staging_bytes(32, 1024, h200) == 0  # each warp sums its own outputs
    # a small device fills up sooner: fewer blocks per output, a smaller buffer
    assert 0 < sum_staging_bytes(8192, 1024, replace(h200, sms=8)) < 64 * 2**20


def test_cuda_estimate_counts_the_staging_buffer_at_the_last_layers_backward():
    """A small classifier's step on CUDA peaks while the first FFN bias gradient is summed (the
    GPU check measured 1.15x the end of the forward pass there); on the CPU no such moment."""
    config = ModelConfig.preset("small", 8000)
    step = TrainingStep(batch_size=64, src_len=128, precision="bf16", encoder_only=True, num_labels=28)
    cuda = estimate_training_memory(config, step, device="cuda")
    assert cuda.peak_phase == "last layer's backward"
    assert cuda.peak_extra.bytes > 64 * 2**20
    assert estimate_training_memory(config, step, device="cpu").peak_phase != cuda.peak_phase
