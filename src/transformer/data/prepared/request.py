"""What ``transformer prepare`` is asked for: the corpora, the tokenizer, the filters and the output,
checked before anything is read.

    request = PrepareRequest(train=[("a.en", "a.de"), ("b.en", "b.de")], weights=[1, 3],
                             valid=[("dev.en", "dev.de")], vocab_size=8000, out="data/ab")

The training split's ``filters``: ``max-len=N`` drops a pair with a side longer than N tokens,
``ratio=R`` one whose longer side has more than R times the tokens of the shorter, ``dedup`` a pair
seen before (same source and target text, across all training corpora), ``truncate=N`` cuts sides
longer than N tokens (counted as truncated). The validation split only loses empty pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from transformer.data.prepared.layout import MANIFEST
from transformer.errors import InputError

FILTER_KEYS = ("max-len", "ratio", "dedup", "truncate")


@dataclass(frozen=True)
class Filters:
    """What the training split keeps (see the module docstring); all off by default."""

    max_len: int | None = None
    ratio: float | None = None
    dedup: bool = False
    truncate: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> Filters:
        """``"max-len=256,ratio=3,dedup"`` -> Filters; InputError naming a bad item."""
        if not text:
            return cls()
        values: dict[str, Any] = {}
        for item in text.split(","):
            key, _, value = item.strip().partition("=")
            if key not in FILTER_KEYS:
                raise InputError(f"--filter {item!r}: unknown filter {key!r}; known: "
                                 f"{', '.join(FILTER_KEYS)} (e.g. max-len=256,ratio=3,dedup)")
            if key == "dedup":
                if value:
                    raise InputError(f"--filter {item!r}: dedup takes no value")
                values["dedup"] = True
                continue
            try:
                number = float(value) if key == "ratio" else int(value)
            except ValueError:
                number = None
            if number is None or number <= 0 or (key == "ratio" and number < 1):
                want = "a number >= 1" if key == "ratio" else "a positive whole number of tokens"
                raise InputError(f"--filter {item!r}: {key} takes {want}, got {value!r}")
            values[key.replace("-", "_")] = number
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {"max_len": self.max_len, "ratio": self.ratio, "dedup": self.dedup,
                "truncate": self.truncate}


@dataclass(frozen=True)
class PrepareRequest:
    """What to prepare: training corpora (source, target file pairs) with optional ``weights``,
    optional validation pairs, the tokenizer (``tokenizer_from`` a run or model directory, or
    trained: ``vocab_size`` pieces on a sample of ``tokenizer_sample`` sentences), ``filters``,
    ``workers`` processes (default: every core) and the ``out`` directory. ``command`` is recorded
    in the manifest. ``tags``: one per training corpus (and per validation corpus, in the same
    order), put first in each of that corpus's source sentences as a piece of its own."""

    train: Sequence[tuple[str, str]]
    out: str
    weights: Sequence[float] | None = None
    valid: Sequence[tuple[str, str]] = ()
    tokenizer_from: str | None = None
    vocab_size: int = 8000
    tokenizer_sample: int = 2_000_000
    joint: bool = True
    model_type: str = "bpe"
    byte_fallback: bool = True
    character_coverage: float = 0.9995
    seed: int = 0
    filters: Filters = field(default_factory=Filters)
    workers: int | None = None
    command: Sequence[str] = ()
    tags: Sequence[str] | None = None

    def check(self) -> None:
        """InputError for what can be refused before reading anything."""
        if not self.train:
            raise InputError("--train-src/--train-tgt: give at least one training corpus")
        if self.weights is not None:
            if len(self.weights) != len(self.train):
                raise InputError(f"--weights: {len(self.weights)} weights for {len(self.train)} "
                                 "training corpora; give one per corpus")
            bad = [w for w in self.weights if not (w > 0 and np.isfinite(w))]
            if bad:
                raise InputError(f"--weights: {bad[0]!r} is not a positive number")
        self._check_tags()
        for split, pairs in (("train", self.train), ("valid", self.valid)):
            for src, tgt in pairs:
                for flag, path in ((f"--{split}-src", src), (f"--{split}-tgt", tgt)):
                    p = Path(path)
                    if not p.exists():
                        raise InputError(f"{path}: file not found ({flag})")
                    if not p.is_file():
                        raise InputError(f"{path}: not a file ({flag})")
        if self.workers is not None and self.workers < 1:
            raise InputError(f"--workers must be at least 1, got {self.workers}")
        if self.tokenizer_from is None:
            if self.vocab_size < 8:
                raise InputError(f"--vocab-size must be at least 8, got {self.vocab_size}")
            if self.tokenizer_sample < 1:
                raise InputError(f"--tokenizer-sample must be positive, got {self.tokenizer_sample}")
        out = Path(self.out)
        if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                                  and not (out / MANIFEST).is_file())):
            raise InputError(f"{out}: exists and is not a prepared data directory; choose another "
                             "--out")

    def _check_tags(self) -> None:
        """InputError naming ``--tags`` for a count that is not one per corpus, no tag at all,
        more validation corpora than tags, or a tag with whitespace. An empty entry leaves its
        corpus untagged (``,<BT>``: tagged back-translation, the real pairs untagged)."""
        if self.tags is None:
            return
        value = ",".join(self.tags)
        if not any(self.tags):
            raise InputError(f"--tags {value!r}: no tag in the list")
        for tag in self.tags:
            if any(c.isspace() for c in tag):
                raise InputError(f"--tags {value!r}: the tag {tag!r} holds whitespace; a tag is "
                                 "one piece, e.g. >>de<<")
        if len(self.tags) != len(self.train):
            raise InputError(f"--tags {value!r}: {len(self.tags)} tags for {len(self.train)} "
                             "training corpora; give one per corpus")
        if len(self.valid) > len(self.tags):
            raise InputError(f"--tags {value!r}: {len(self.tags)} tags for {len(self.valid)} "
                             "validation corpora; validation corpus k takes tag k, so give at "
                             "most one per training corpus")
