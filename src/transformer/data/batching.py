"""From sentence pairs to padded batches: encoding with a length limit, token-budget batches
bucketed by length, DDP sharding, and collation into :class:`Batch`.

Shapes: B sentences in a batch, S longest source, T longest target + 1 (BOS or EOS).

The pipeline::

    encoded = encode_pairs(corpus, src_tok, tgt_tok, max_len=cfg.max_len)
    sampler = TokenBatchSampler(encoded.lengths, max_tokens=4096, seed=0, rank=rank, world_size=world)
    loader = DataLoader(encoded, batch_sampler=sampler, collate_fn=collate_pairs)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader: ...

Sequence layout: ``src`` is the source ids as they are (no BOS/EOS; use :func:`collate_sources`
for decoding so training and translation agree); ``tgt_in`` is BOS + target and ``tgt_out`` is
target + EOS. A pair fits a model with ``cfg.max_len`` positions when ``len(src) <= max_len`` and
``len(tgt) + 1 <= max_len``; :func:`encode_pairs` makes every pair fit.

Batch cost. A batch of n pairs costs ``n * width`` where ``width = max(longest src, longest tgt)
+ 1``: the padded size of its larger tensor, padding included. :class:`TokenBatchSampler` keeps
every batch within ``max_tokens`` by that measure.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Sampler

from transformer.data.batch import Batch
from transformer.data.parallel import ParallelCorpus
from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer

log = logging.getLogger(__name__)

ON_LONG = ("truncate", "filter")

Pair = tuple[list[int], list[int]]


@dataclass
class EncodedPairs(Sequence[Pair]):
    """Token-id pairs ready for batching: a sequence of ``(src_ids, tgt_ids)`` (no BOS/EOS) that
    a DataLoader can index, plus what encoding had to do to make them fit.

    ``num_truncated`` pairs were cut to fit ``max_len`` (``on_long="truncate"``),
    ``num_filtered`` were dropped for being too long (``on_long="filter"``) and ``num_empty`` were
    dropped because a side encoded to no tokens.
    """

    pairs: list[Pair]
    max_len: int
    num_truncated: int = 0
    num_filtered: int = 0
    num_empty: int = 0
    lengths: list[tuple[int, int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # (src_len, tgt_len) per pair, what TokenBatchSampler sorts and budgets by
        self.lengths = [(len(s), len(t)) for s, t in self.pairs]

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index):  # type: ignore[override]
        return self.pairs[index]

    def __iter__(self) -> Iterator[Pair]:
        return iter(self.pairs)

    @property
    def src(self) -> list[list[int]]:
        return [s for s, _ in self.pairs]

    @property
    def tgt(self) -> list[list[int]]:
        return [t for _, t in self.pairs]

    @property
    def widths(self) -> list[int]:
        """Per pair ``max(len(src), len(tgt)) + 1``: its cost per sentence in a batch."""
        return [max(s, t) + 1 for s, t in self.lengths]


def encode_pairs(
    corpus: ParallelCorpus,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    *,
    max_len: int,
    on_long: str = "truncate",
) -> EncodedPairs:
    """Tokenize a corpus so that every pair fits a model with ``max_len`` positions.

    A pair is too long when ``len(src) > max_len`` or ``len(tgt) + 1 > max_len`` (the +1 is BOS
    in ``tgt_in`` and EOS in ``tgt_out``). ``on_long="truncate"`` cuts the long side(s) to fit;
    ``"filter"`` drops the pair. Either way the number is counted and logged, so a long sentence
    never reaches the embedding as an index error.
    """
    if on_long not in ON_LONG:
        raise ValueError(f"on_long must be one of {ON_LONG}, got {on_long!r}")
    if not isinstance(max_len, int) or max_len < 2:
        raise ValueError(f"max_len must be an integer >= 2 (a token plus BOS/EOS), got {max_len!r}")
    src_ids = src_tok.encode_batch(corpus.src)
    tgt_ids = tgt_tok.encode_batch(corpus.tgt)
    max_src, max_tgt = max_len, max_len - 1
    pairs: list[Pair] = []
    truncated = filtered = empty = 0
    for s, t in zip(src_ids, tgt_ids, strict=True):
        if not s or not t:
            empty += 1
            continue
        if len(s) > max_src or len(t) > max_tgt:
            if on_long == "filter":
                filtered += 1
                continue
            truncated += 1
            s, t = s[:max_src], t[:max_tgt]
        pairs.append((s, t))
    name = corpus.name or "corpus"
    if truncated:
        log.warning(
            "%s: truncated %d of %d pairs to max_len=%d", name, truncated, len(corpus), max_len
        )
    if filtered:
        log.warning(
            "%s: dropped %d of %d pairs longer than max_len=%d",
            name,
            filtered,
            len(corpus),
            max_len,
        )
    if empty:
        log.warning("%s: dropped %d pairs with a side that encodes to no tokens", name, empty)
    return EncodedPairs(
        pairs, max_len=max_len, num_truncated=truncated, num_filtered=filtered, num_empty=empty
    )


class TokenBatchSampler(Sampler[list[int]]):
    """Batches of example indices, bucketed by length and bounded by a token budget.

    ``lengths`` is either one int per example (its width: the positions it needs, BOS/EOS
    included) or one ``(src_len, tgt_len)`` pair per example (raw token counts, width
    ``max(src_len, tgt_len) + 1``; the pair is also used to group similar source and target
    lengths, which cuts padding). A batch of n examples whose widest is w costs ``n * w`` and never
    exceeds ``max_tokens`` (nor ``max_sentences`` examples, when given).

    Each epoch: examples are sorted by width (ties broken at random from ``seed`` and the epoch),
    cut greedily into batches, and the batches are shuffled (``shuffle=True``). The cut points
    depend only on the sorted widths, so the number of batches is the same every epoch.

    DDP: rank ``r`` of ``world_size`` takes every ``world_size``-th batch of the shared order.
    Every rank gets the same number of batches (so collective ops never hang) and no example goes
    to two ranks: when the batch count is not a multiple of ``world_size``, the largest batches are
    split in two until it is. Over an epoch the ranks together see every example exactly once.
    Only when that is impossible (every batch is down to one example, as with fewer examples than
    ranks) are ``num_repeated`` batches repeated, with a warning, as DistributedSampler does.
    """

    def __init__(
        self,
        lengths: Sequence[int] | Sequence[tuple[int, int]],
        *,
        max_tokens: int,
        max_sentences: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if not isinstance(max_tokens, int) or max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if max_sentences is not None and max_sentences <= 0:
            raise ValueError(f"max_sentences must be positive, got {max_sentences!r}")
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
        array = np.asarray(lengths, dtype=np.int64)
        if array.ndim == 2 and array.shape[1] == 2:
            self._src_len, self._tgt_len = array[:, 0], array[:, 1]
            self._width = np.maximum(self._src_len, self._tgt_len) + 1
        elif array.ndim == 1:
            self._width = array
            self._src_len = self._tgt_len = None
        else:
            raise ValueError(
                f"lengths must be ints or (src_len, tgt_len) pairs, got an array of shape {array.shape}"
            )
        if self._width.size and self._width.min() <= 0:
            raise ValueError(f"lengths must be positive, got {int(self._width.min())}")
        if self._width.size and self._width.max() > max_tokens:
            worst = int(self._width.argmax())
            raise ValueError(
                f"example {worst} needs {int(self._width[worst])} token positions, more than "
                f"max_tokens={max_tokens}; raise max_tokens or lower max_len"
            )
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self._sizes = self._batch_sizes()
        self.num_repeated = -len(self._sizes) % world_size if self._sizes else 0
        if self.num_repeated:
            log.warning(
                "%d batches of single examples cannot be shared evenly by %d ranks: "
                "%d batches are repeated each epoch",
                len(self._sizes),
                world_size,
                self.num_repeated,
            )

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose tie-breaking and batch order :meth:`__iter__` produces."""
        self.epoch = epoch

    def __len__(self) -> int:
        """Batches this rank yields per epoch (the same on every rank and every epoch)."""
        return -(-len(self._sizes) // self.world_size) if self._sizes else 0

    def _batch_sizes(self) -> list[int]:
        """Examples per batch, in sorted-width order, split so the count divides world_size."""
        widths = np.sort(self._width)
        sizes: list[int] = []
        count = 0
        cap = self.max_sentences or len(widths)
        for w in widths.tolist():
            # sorted ascending, so w is the widest of the batch if it joins
            if count and ((count + 1) * w > self.max_tokens or count == cap):
                sizes.append(count)
                count = 0
            count += 1
        if count:
            sizes.append(count)
        while len(sizes) % self.world_size and max(sizes, default=1) > 1:
            big = sizes.index(max(sizes))
            half = sizes[big] // 2
            sizes[big : big + 1] = [sizes[big] - half, half]
        return sizes

    def _order(self, rng: np.random.Generator) -> np.ndarray:
        """Example indices sorted by width (then source and target length), ties at random."""
        noise = rng.random(len(self._width)) if self.shuffle else np.arange(len(self._width))
        if self._src_len is None:
            return np.lexsort((noise, self._width))
        return np.lexsort((noise, self._tgt_len, self._src_len, self._width))

    def batches(self) -> list[list[int]]:
        """All batches of the current epoch in their shared order, before sharding."""
        if not self._sizes:
            return []
        rng = np.random.default_rng([self.seed, self.epoch])
        order = self._order(rng)
        bounds = np.cumsum(self._sizes)[:-1]
        batches = [chunk.tolist() for chunk in np.split(order, bounds)]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        # only when batches cannot be split further: repeat some so every rank gets as many
        batches.extend(batches[i % len(batches)] for i in range(self.num_repeated))
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.batches()[self.rank :: self.world_size]


def collate_pairs(
    pairs: Sequence[Pair],
    *,
    pad_id: int = PAD_ID,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> Batch:
    """Pad ``(src_ids, tgt_ids)`` pairs into a :class:`Batch`.

    ``src`` (B, S) is the source ids right-padded; ``tgt_in`` (B, T) is BOS + target and
    ``tgt_out`` (B, T) target + EOS, with T = longest target + 1. Usable directly as a DataLoader
    ``collate_fn``.
    """
    if not pairs:
        raise ValueError("cannot collate an empty list of pairs")
    num = len(pairs)
    src_len = max(len(s) for s, _ in pairs)
    tgt_len = max(len(t) for _, t in pairs) + 1
    src = np.full((num, src_len), pad_id, dtype=np.int64)  # (B, S)
    tgt_in = np.full((num, tgt_len), pad_id, dtype=np.int64)  # (B, T)
    tgt_out = np.full((num, tgt_len), pad_id, dtype=np.int64)  # (B, T)
    src_tokens = tgt_tokens = 0
    for row, (s, t) in enumerate(pairs):
        src[row, : len(s)] = s
        tgt_in[row, 0] = bos_id
        tgt_in[row, 1 : len(t) + 1] = t
        tgt_out[row, : len(t)] = t
        tgt_out[row, len(t)] = eos_id
        src_tokens += len(s)
        tgt_tokens += len(t) + 1
    return Batch(
        src=torch.from_numpy(src),
        tgt_in=torch.from_numpy(tgt_in),
        tgt_out=torch.from_numpy(tgt_out),
        num_src_tokens=src_tokens,
        num_tgt_tokens=tgt_tokens,
    )


def collate_sources(sources: Sequence[Sequence[int]], *, pad_id: int = PAD_ID) -> Tensor:
    """Pad source id lists into a (B, S) long tensor, laid out exactly as :func:`collate_pairs`
    lays out ``src``: what translation feeds to ``greedy_decode``/``beam_search``."""
    if not sources:
        raise ValueError("cannot collate an empty list of sources")
    out = np.full((len(sources), max(len(s) for s in sources)), pad_id, dtype=np.int64)  # (B, S)
    for row, s in enumerate(sources):
        out[row, : len(s)] = s
    return torch.from_numpy(out)


def iter_batches(pairs: Sequence[Pair], sampler: Iterable[Sequence[int]]) -> Iterator[Batch]:
    """The batches of ``pairs`` that ``sampler`` (a TokenBatchSampler or any iterable of index
    lists) picks, collated: a DataLoader without workers."""
    for indices in sampler:
        yield collate_pairs([pairs[i] for i in indices])


@dataclass(frozen=True)
class PaddingStats:
    """Real and padded token counts of a set of batches (both tensors, src and tgt_out)."""

    num_batches: int
    src_tokens: int
    src_slots: int
    tgt_tokens: int
    tgt_slots: int

    @property
    def padding_share(self) -> float:
        """Share of all tensor slots (src and tgt) that hold padding."""
        slots = self.src_slots + self.tgt_slots
        return 1.0 - (self.src_tokens + self.tgt_tokens) / slots if slots else 0.0

    @property
    def src_padding_share(self) -> float:
        return 1.0 - self.src_tokens / self.src_slots if self.src_slots else 0.0

    @property
    def tgt_padding_share(self) -> float:
        return 1.0 - self.tgt_tokens / self.tgt_slots if self.tgt_slots else 0.0


def padding_stats(
    lengths: Sequence[tuple[int, int]], batches: Sequence[Sequence[int]]
) -> PaddingStats:
    """Padding of ``batches`` (lists of indices into ``lengths``, raw ``(src_len, tgt_len)``)
    as :func:`collate_pairs` would pad them, computed without building tensors."""
    array = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
    src_tokens = src_slots = tgt_tokens = tgt_slots = 0
    for indices in batches:
        rows = array[np.asarray(indices, dtype=np.int64)]
        src_tokens += int(rows[:, 0].sum())
        src_slots += len(rows) * int(rows[:, 0].max())
        tgt_tokens += int(rows[:, 1].sum()) + len(rows)
        tgt_slots += len(rows) * (int(rows[:, 1].max()) + 1)
    return PaddingStats(len(batches), src_tokens, src_slots, tgt_tokens, tgt_slots)
