from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def tokenizer():
    from transformer.data.builtin_task import english_number, german_number
    from transformer.data.tokenizer import Tokenizer

    texts = [english_number(n) for n in range(1, 300)] + [german_number(n) for n in range(1, 300)]
    return Tokenizer.train(texts, vocab_size=60, byte_fallback=False)
