"""Shared fixtures. Tests that need the shared corpora find them through ``$TRANSFORMER_DATA``,
falling back to ``../shared/data`` beside the checkout; under CI a missing folder is a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder (multi30k/, goemotions/, nsmc/)."""
    path = Path(os.environ.get("TRANSFORMER_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        message = f"shared data folder not found: {path} (set TRANSFORMER_DATA)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(autouse=True)
def _seed_and_threads() -> None:
    """Every test starts from the same RNG state."""
    torch.manual_seed(0)


def _slow_bf16(*args, **kwargs):
    from transformer.precision import Probe

    return Probe(fp32_ms=1.0, bf16_ms=2.0, tokens=1, backward=False)


@pytest.fixture(scope="session", autouse=True)
def _steady_precision():
    """``precision="auto"`` without its timing probe: the probe reports bf16 slower, so auto runs
    fp32 on every machine and two calls in one test never choose differently by timing noise.
    Session-wide, so session fixtures (a served model) are steadied too. Tests of the probe itself
    are marked ``real_probe`` (tests/test_precision.py); a test that runs the command line in a
    subprocess pins ``--precision`` where it compares runs."""
    from transformer import precision

    real = {"probe_layer": precision.probe_layer, "probe_decoding": precision.probe_decoding}
    with pytest.MonkeyPatch.context() as patch:
        for name in real:
            patch.setattr(precision, name, _slow_bf16)
        yield real


@pytest.fixture(autouse=True)
def _real_probe_when_marked(request, monkeypatch, _steady_precision) -> None:
    if request.node.get_closest_marker("real_probe"):
        from transformer import precision

        for name, function in _steady_precision.items():
            monkeypatch.setattr(precision, name, function)
