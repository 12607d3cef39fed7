"""Token ids from text, fitted to a model's length limit, for both tasks.

:func:`encode_pairs` tokenizes a parallel corpus and :func:`encode_classification` labelled texts;
both share one core (cut or drop what is too long, count it, log it), so a long sentence never
reaches the embedding as an index error. :mod:`~transformer.data.collation` pads what they make
into batches.

A pair fits a model with ``cfg.max_len`` positions when ``len(src) <= max_len`` and
``len(tgt) + 1 <= max_len`` (the +1 is BOS in ``tgt_in`` and EOS in ``tgt_out``); a text fits
when it has at most ``max_len`` tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from transformer.config.choices import ON_LONG
from transformer.data.tokenizer import Tokenizer

if TYPE_CHECKING:
    from transformer.data.classification import ClassificationData
    from transformer.data.parallel import ParallelCorpus

log = logging.getLogger(__name__)

Pair = tuple[list[int], list[int]]  # (source ids, target ids), no BOS/EOS
Labelled = tuple[list[int], list[int]]  # (token ids, label ids)
Row = TypeVar("Row")


@dataclass
class Encoded(Sequence[Row]):
    """Encoded examples a DataLoader can index, plus what encoding had to do to fit ``max_len``:
    ``num_truncated`` were cut (``on_long="truncate"``), ``num_filtered`` dropped
    (``on_long="filter"``)."""

    items: list[Row]
    max_len: int
    num_truncated: int = 0
    num_filtered: int = 0

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):  # type: ignore[override]
        return self.items[index]

    def __iter__(self) -> Iterator[Row]:
        return iter(self.items)


@dataclass
class EncodedPairs(Encoded[Pair]):
    """Token-id pairs ``(src_ids, tgt_ids)`` (no BOS/EOS) ready for batching; ``num_empty`` pairs
    were dropped because a side encoded to no tokens."""

    num_empty: int = 0
    lengths: list[tuple[int, int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # (src_len, tgt_len) per pair, what TokenBatchSampler sorts and budgets by
        self.lengths = [(len(s), len(t)) for s, t in self.items]

    @property
    def pairs(self) -> list[Pair]:
        return self.items

    @property
    def src(self) -> list[list[int]]:
        return [s for s, _ in self.items]

    @property
    def tgt(self) -> list[list[int]]:
        return [t for _, t in self.items]

    @property
    def widths(self) -> list[int]:
        """Per pair ``max(len(src), len(tgt)) + 1``: its cost per sentence in a batch."""
        return [max(s, t) + 1 for s, t in self.lengths]


@dataclass
class EncodedTexts(Encoded[Labelled]):
    """Token ids with their label ids, ``(ids, label_ids)``, ready for batching."""

    @property
    def lengths(self) -> list[int]:
        """Tokens per text: the widths :class:`~transformer.data.token_batch_sampler.TokenBatchSampler`
        budgets by."""
        return [len(ids) for ids, _ in self.items]


def _fit(
    rows: Iterable[Row],
    *,
    too_long: Callable[[Row], bool],
    cut: Callable[[Row], Row],
    on_long: str,
    total: int,
    name: str,
    noun: str,
    limit: str,
) -> tuple[list[Row], int, int]:
    """The shared core of the encoders: keep ``rows`` that fit, cut (``"truncate"``) or drop
    (``"filter"``) those that do not, log how many of ``total``. Returns (kept, truncated,
    filtered)."""
    kept: list[Row] = []
    truncated = filtered = 0
    for row in rows:
        if too_long(row):
            if on_long == "filter":
                filtered += 1
                continue
            truncated += 1
            row = cut(row)
        kept.append(row)
    if truncated:
        log.warning("%s: truncated %d of %d %s to %s", name, truncated, total, noun, limit)
    if filtered:
        log.warning("%s: dropped %d of %d %s longer than %s", name, filtered, total, noun, limit)
    return kept, truncated, filtered


def _check_on_long(on_long: str) -> None:
    if on_long not in ON_LONG:
        raise ValueError(f"on_long must be one of {ON_LONG}, got {on_long!r}")


def encode_pairs(
    corpus: ParallelCorpus,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    *,
    max_len: int,
    on_long: str = "truncate",
    sampling: float = 0.0,
    seed: int = 0,
) -> EncodedPairs:
    """Tokenize a corpus so that every pair fits a model with ``max_len`` positions.

    ``sampling`` > 0: each side sampled (:meth:`~transformer.data.tokenizer.Tokenizer.sample_batch`
    with that alpha), the source from ``seed`` and the target from ``seed + 1``, so the same seed
    gives the same pairs.

    A pair is too long when ``len(src) > max_len`` or ``len(tgt) + 1 > max_len`` (the +1 is BOS
    in ``tgt_in`` and EOS in ``tgt_out``). ``on_long="truncate"`` cuts the long side(s) to fit;
    ``"filter"`` drops the pair. Either way the number is counted and logged, so a long sentence
    never reaches the embedding as an index error. Pairs with a side that encodes to no tokens are
    dropped (``num_empty``).
    """
    _check_on_long(on_long)
    if not isinstance(max_len, int) or max_len < 2:
        raise ValueError(f"max_len must be an integer >= 2 (a token plus BOS/EOS), got {max_len!r}")
    if sampling > 0:
        src_ids = src_tok.sample_batch(corpus.src, alpha=sampling, seed=seed)
        tgt_ids = tgt_tok.sample_batch(corpus.tgt, alpha=sampling, seed=seed + 1)
    else:
        src_ids = src_tok.encode_batch(corpus.src)
        tgt_ids = tgt_tok.encode_batch(corpus.tgt)
    max_src, max_tgt = max_len, max_len - 1
    encoded = list(zip(src_ids, tgt_ids, strict=True))
    nonempty = [(s, t) for s, t in encoded if s and t]
    empty = len(encoded) - len(nonempty)
    name = corpus.name or "corpus"
    pairs, truncated, filtered = _fit(
        nonempty,
        too_long=lambda p: len(p[0]) > max_src or len(p[1]) > max_tgt,
        cut=lambda p: (p[0][:max_src], p[1][:max_tgt]),
        on_long=on_long, total=len(corpus), name=name, noun="pairs", limit=f"max_len={max_len}",
    )
    if empty:
        log.warning("%s: dropped %d pairs with a side that encodes to no tokens", name, empty)
    return EncodedPairs(
        pairs, max_len=max_len, num_truncated=truncated, num_filtered=filtered, num_empty=empty
    )


def encode_classification(
    data: ClassificationData, tokenizer: Tokenizer, *, max_len: int, on_long: str = "truncate",
    sampling: float = 0.0, seed: int = 0,
) -> EncodedTexts:
    """Tokenize texts so that none is longer than ``max_len`` tokens (for a CLS-pooling model
    pass ``model.max_tokens``). Longer texts are truncated or dropped (``on_long``), counted and
    logged. ``sampling`` and ``seed``: as for :func:`encode_pairs`."""
    _check_on_long(on_long)
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
    items, truncated, filtered = _fit(
        zip(tokenizer.sample_batch(data.texts, alpha=sampling, seed=seed) if sampling > 0
            else tokenizer.encode_batch(data.texts), data.labels, strict=True),
        too_long=lambda item: len(item[0]) > max_len,
        cut=lambda item: (item[0][:max_len], item[1]),
        on_long=on_long, total=len(data), name=data.name, noun="texts", limit=f"{max_len} tokens",
    )
    return EncodedTexts(items, max_len=max_len, num_truncated=truncated, num_filtered=filtered)
