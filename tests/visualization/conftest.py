"""Tiny model directories (an untrained translator and classifier with real tokenizers) for the
picture commands."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from helpers import save_classifier, save_translator

SENTENCES = [
    "a man rides a bike", "two dogs play in the snow", "the girl reads a book",
    "a woman sings on a stage", "children run across the park", "the old man drinks coffee",
    "ein mann fährt fahrrad", "zwei hunde spielen im schnee", "das mädchen liest ein buch",
]


@pytest.fixture(scope="session")
def tokenizer():
    from transformer.data.tokenizer import Tokenizer

    return Tokenizer.train(SENTENCES * 3, vocab_size=60, model_type="bpe", byte_fallback=False)


@pytest.fixture(scope="session")
def translation_dir(tmp_path_factory, tokenizer):
    return save_translator(tmp_path_factory.mktemp("translation"), tokenizer, d_model=16, d_ff=32,
                           num_heads=2, num_encoder_layers=2, max_len=32, dropout=0.1)


@pytest.fixture(scope="session")
def classifier_dir(tmp_path_factory, tokenizer):
    return save_classifier(tmp_path_factory.mktemp("classifier"), tokenizer, ["neg", "neu", "pos"])


def read_png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file, after checking its signature and header chunk."""
    data = Path(path).read_bytes()
    assert len(data) > 100, f"{path} is nearly empty"
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="session")
def png_size():
    """The PNG reader as a fixture (test modules cannot import conftest under importlib mode)."""
    return read_png_size
