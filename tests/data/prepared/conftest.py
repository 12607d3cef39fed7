"""Fixtures of the prepared data tests: two training corpora and a validation one with every case
prepare must handle, a tokenizer saved as a run's, and prepared directories of them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from transformer.data.prepared.directory import PreparedData
from transformer.data.prepared.prepare import prepare
from transformer.data.prepared.request import PrepareRequest
from transformer.data.tokenizer import Tokenizer

WORDS = ["a", "man", "is", "riding", "bike", "the", "dog", "runs", "on", "grass", "woman", "sings",
         "loud", "song", "in", "park"]
WORTE = ["ein", "mann", "fährt", "fahrrad", "der", "hund", "läuft", "auf", "gras", "frau", "singt",
         "laut", "lied", "im", "park"]


def sentence(rng: random.Random, words: list[str], n: int) -> str:
    return " ".join(rng.choice(words) for _ in range(n))


def corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Line pairs with the cases prepare must handle: empty sides, whitespace, long pairs,
    lopsided pairs and repeats."""
    rng = random.Random(seed)
    src, tgt = [], []
    for i in range(n):
        k = rng.randint(1, 9)
        s, t = sentence(rng, WORDS, k), sentence(rng, WORTE, k + rng.randint(-1, 1) or 1)
        if i % 17 == 3:
            s = ""
        elif i % 19 == 4:
            t = "   "
        elif i % 13 == 5:
            s = sentence(rng, WORDS, 30)  # long
        elif i % 11 == 6:
            t = sentence(rng, WORTE, 25)  # lopsided
        elif i % 7 == 0 and i:
            s, t = src[i - 7], tgt[i - 7]  # a repeat
        src.append(f"  {s} " if i % 5 == 1 else s)
        tgt.append(t)
    return src, tgt


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("text")
    out = {}
    for name, (n, seed) in {"a": (240, 1), "b": (90, 2), "v": (30, 3)}.items():
        src, tgt = corpus(n, seed)
        out[name] = (write(root / f"{name}.en", src), write(root / f"{name}.de", tgt))
    return out


@pytest.fixture(scope="session")
def tokenizer(files):
    texts = [line.strip() for name in ("a", "b") for path in files[name]
             for line in Path(path).read_text(encoding="utf-8").splitlines()]
    tok = Tokenizer.train(texts, vocab_size=60, byte_fallback=False)
    run = Path(files["a"][0]).parent / "run"
    from transformer.data.tokenizer_pair import save_tokenizers

    save_tokenizers(tok, tok, run / "tokenizer")
    return tok, str(run)


@pytest.fixture
def opened(files, tokenizer, tmp_path):
    """A function that prepares the training corpora a and b (mixed by ``weights``) into
    ``tmp_path/data`` and opens the directory."""

    def prepare_and_open(weights=None) -> PreparedData:
        _, run = tokenizer
        out = tmp_path / "data"
        prepare(PrepareRequest(train=[files["a"], files["b"]], weights=weights, tokenizer_from=run,
                               workers=1, out=str(out)))
        return PreparedData.open(out)

    return prepare_and_open
