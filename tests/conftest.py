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
