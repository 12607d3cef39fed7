"""The training-memory estimate: exact parameter counts, the seed's GPT-2 example, and peaks within
25% of a measured training step on the CPU."""

from __future__ import annotations

import json

import pytest
import torch

from transformer import ModelConfig, Transformer, TransformerClassifier
from transformer.cli import main
from transformer.memory import (
    LiveTensorBytes,
    batch_for_tokens,
    estimate_training_memory,
    format_report,
    measure_training_peak,
    parameter_count,
    seed_formula_estimate,
)

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
    estimate = estimate_training_memory(config, batch_size=2, src_len=5, device="cpu")
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


def test_seed_formula_reproduces_the_gpt2_example():
    # The seed's own expressions for GPT-2 small, evaluated here as the reference.
    L, N, E, B, T, TOKS = 12, 12, 768, 8, 1024, 50257
    model_params = (TOKS * E) + L * (4 * E**2 + 2 * E * 4 * E + 4 * E)
    act_params = B * T * (2 * TOKS + L * (14 * E + N * T))
    seed_bytes = (4 * model_params + 2 * act_params) * 4

    estimate = seed_formula_estimate(num_layers=L, num_heads=N, d_model=E, vocab_size=TOKS,
                                     batch_size=B, seq_len=T)
    assert estimate.peak_bytes == seed_bytes
    assert estimate.parameters == model_params
    assert estimate.line("activations").bytes == act_params * 4
    assert sum(x.bytes for x in estimate.lines) == estimate.peak_bytes
    assert round(estimate.peak_bytes / 1e9, 2) == 26.68
    # ... and within 5% of the 27.5 GB that the seed quotes as Hugging Face GPT-2's real use
    assert abs(estimate.peak_bytes / 27.5e9 - 1) < 0.05


def test_seed_formula_via_the_command_line(capsys):
    argv = ["memory", "--decoder-only", "--decoder-layers", "12", "--heads", "12",
            "--d-model", "768", "--vocab-size", "50257", "--batch-size", "8", "--tgt-len", "1024"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert round(out["peak_gb"], 2) == 26.68
    assert main(argv) == 0
    assert "26.68 GB" in capsys.readouterr().out


# Tiny-to-small configurations, a second or less each on the CPU.
MEASURED = {
    "tiny translation": (ModelConfig.tiny(vocab_size=1000),
                         dict(batch_size=8, src_len=20, tgt_len=24)),
    "tiny pre-LN gelu": (ModelConfig.tiny(vocab_size=500, norm_first=True, activation="gelu"),
                         dict(batch_size=8, src_len=16, tgt_len=20)),
    "tiny shared+tied, learned positions, attention and FFN dropout": (
        ModelConfig.tiny(vocab_size=800, share_embeddings=True, tie_embeddings=True,
                         positional="learned", attention_dropout=0.1, activation_dropout=0.1),
        dict(batch_size=4, src_len=30, tgt_len=25)),
    "tiny without dropout": (ModelConfig.tiny(vocab_size=700, dropout=0.0),
                             dict(batch_size=8, src_len=20, tgt_len=24)),
    "tiny bf16 autocast": (ModelConfig.tiny(vocab_size=600),
                           dict(batch_size=6, src_len=18, tgt_len=22, precision="bf16")),
    "small translation, 2+2 layers": (
        ModelConfig.small(vocab_size=1000, num_encoder_layers=2, num_decoder_layers=2),
        dict(batch_size=4, src_len=16, tgt_len=16)),
    "tiny classifier, mean pooling": (ModelConfig.tiny(vocab_size=1000),
                                      dict(batch_size=8, src_len=40, encoder_only=True,
                                           num_labels=5)),
    "small classifier, CLS pooling, pre-LN": (
        ModelConfig.small(vocab_size=1000, num_encoder_layers=2, norm_first=True),
        dict(batch_size=8, src_len=32, encoder_only=True, num_labels=28, pooling="cls")),
}


@pytest.mark.parametrize("config, shape", MEASURED.values(), ids=MEASURED)
def test_estimate_is_within_5_percent_of_the_measured_peak(config, shape):
    estimate = estimate_training_memory(config, device="cpu", **shape)
    measured = measure_training_peak(config, device="cpu", **shape)
    assert measured.peak_bytes > 0
    assert set(measured.phase_peaks) == {"forward", "backward", "optimizer"}
    assert max(measured.phase_peaks.values()) == measured.peak_bytes
    assert abs(estimate.peak_bytes / measured.peak_bytes - 1) < 0.05, format_report(
        estimate, measured)


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


def test_bad_arguments_name_the_value():
    config = ModelConfig.tiny(vocab_size=100)
    with pytest.raises(ValueError, match="precision"):
        estimate_training_memory(config, batch_size=2, src_len=4, precision="fp8")
    with pytest.raises(ValueError, match="batch_size"):
        estimate_training_memory(config, batch_size=0, src_len=4)
    with pytest.raises(ValueError, match="max_len=128"):
        estimate_training_memory(config, batch_size=2, src_len=4, tgt_len=129)
    with pytest.raises(ValueError, match="fp16"):
        measure_training_peak(config, batch_size=2, src_len=4, precision="fp16", device="cpu")


def test_batch_for_tokens_counts_like_the_token_sampler():
    assert batch_for_tokens(4096, src_len=63, tgt_len=64) == 64  # width max(63 + 1, 64)
    assert batch_for_tokens(4096, src_len=64, tgt_len=None) == 4096 // 65
    assert batch_for_tokens(4096, src_len=128, tgt_len=None, encoder_only=True) == 32
    with pytest.raises(ValueError, match="max_tokens=10"):
        batch_for_tokens(10, src_len=64, tgt_len=64)


def test_live_tensor_bytes_counts_storages_once_until_freed():
    with LiveTensorBytes() as tracker:
        a = torch.zeros(1000)  # 4000 bytes
        view = a[10:20]
        b = a + 1
        assert tracker.current == 8000
        del a
        assert tracker.current == 8000  # the view keeps the storage alive
        del view, b
        assert tracker.current == 0
    assert tracker.peak == 8000


def test_command_line_estimate_and_measure(capsys):
    argv = ["memory", "--preset", "tiny", "--vocab-size", "300", "--batch-size", "4",
            "--src-len", "12", "--device", "cpu", "--measure", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["parameters"] == Transformer(ModelConfig.tiny(vocab_size=300)).num_parameters()
    assert 0.75 < out["ratio"] < 1.25
    assert out["measured"]["device"] == "cpu"
    names = [line["name"] for line in out["lines"]]
    for name in ("parameters", "gradients", "optimizer state", "activations: encoder",
                 "activations: decoder", "loss"):
        assert name in names

    assert main(["memory", "--preset", "tiny", "--encoder-only", "--num-labels", "3",
                 "--max-tokens", "256", "--src-len", "32", "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "encoder-only" in text and "batch 8 x 32 tokens" in text


@pytest.mark.parametrize("argv, fragment", [
    (["--d-model", "30", "--heads", "4"], "d_model=30"),
    (["--src-len", "300"], "max_len=256"),
    (["--batch-size", "0"], "batch_size"),
    (["--decoder-only", "--measure"], "--decoder-only"),
    (["--vocab-size", "0"], "src_vocab_size"),
])
def test_command_line_bad_values_exit_2(capsys, argv, fragment):
    assert main(["memory", *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1
