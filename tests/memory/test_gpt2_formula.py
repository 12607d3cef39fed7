"""The seed tutorial's formula reproduces its own GPT-2 example, from Python and from the command
line."""

from __future__ import annotations

import json

from transformer.cli import main
from transformer.memory import seed_formula_estimate


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
