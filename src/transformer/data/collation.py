"""Padded batches from encoded examples, for both tasks: what a DataLoader's ``collate_fn`` does.

Shapes: B examples in a batch, S longest source (or text), T longest target + 1 (BOS or EOS),
C labels.

The translation pipeline::

    encoded = encode_pairs(corpus, src_tok, tgt_tok, max_len=cfg.max_len)
    sampler = TokenBatchSampler(encoded.lengths, max_tokens=4096, seed=0, rank=rank, world_size=world)
    loader = DataLoader(encoded, batch_sampler=sampler, collate_fn=collate_pairs)

and the classification one: :func:`~transformer.data.encoding.encode_classification`, then
:func:`collate_classification` (with ``num_labels`` and ``multi_label`` bound by
``functools.partial``). Every id row is padded by :func:`~transformer.data.padding.pad_rows`.

Sequence layout: ``src`` is the source ids as they are (no BOS/EOS; use :func:`collate_sources`
for decoding so training and translation agree); ``tgt_in`` is BOS + target and ``tgt_out`` is
target + EOS.

Batch cost. A batch of n pairs costs ``n * width`` where ``width = max(longest src, longest tgt)
+ 1``: the padded size of its larger tensor, padding included (see
:class:`~transformer.data.token_batch_sampler.TokenBatchSampler`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from transformer.data.batch_types import Batch, ClassificationBatch
from transformer.data.encoding import Pair
from transformer.data.padding import pad_rows
from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


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
    tgt_len = max(len(t) for _, t in pairs) + 1
    tgt_in = np.full((num, tgt_len), pad_id, dtype=np.int64)  # (B, T)
    tgt_out = np.full((num, tgt_len), pad_id, dtype=np.int64)  # (B, T)
    src_tokens = tgt_tokens = 0
    for row, (s, t) in enumerate(pairs):
        tgt_in[row, 0] = bos_id
        tgt_in[row, 1 : len(t) + 1] = t
        tgt_out[row, : len(t)] = t
        tgt_out[row, len(t)] = eos_id
        src_tokens += len(s)
        tgt_tokens += len(t) + 1
    return Batch(
        src=pad_rows([s for s, _ in pairs], pad_id=pad_id),  # (B, S)
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
    return pad_rows(sources, pad_id=pad_id)  # (B, S)


def collate_classification(
    items: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    num_labels: int,
    multi_label: bool,
    pad_id: int = PAD_ID,
) -> ClassificationBatch:
    """Pad ``(ids, label_ids)`` items into a :class:`ClassificationBatch`: single-label targets
    are the (B,) class ids (each item must have exactly one), multi-label targets a (B, C) 0/1
    float matrix. Bind the keywords with ``functools.partial`` to use it as a ``collate_fn``."""
    if not items:
        raise ValueError("cannot collate an empty list of items")
    tokens = pad_rows([ids for ids, _ in items], pad_id=pad_id)  # (B, S)
    if multi_label:
        targets = torch.zeros(len(items), num_labels)  # (B, C)
        for row, (_, labels) in enumerate(items):
            targets[row, list(labels)] = 1.0
    else:
        if any(len(labels) != 1 for _, labels in items):
            bad = next(i for i, (_, labels) in enumerate(items) if len(labels) != 1)
            raise ValueError(
                f"single-label collation needs exactly one label per text; item {bad} has "
                f"{len(items[bad][1])} (use multi_label=True)"
            )
        targets = torch.tensor([labels[0] for _, labels in items], dtype=torch.long)  # (B,)
    return ClassificationBatch(tokens, targets)


def iter_batches(pairs: Sequence[Pair], sampler: Iterable[Sequence[int]]) -> Iterator[Batch]:
    """The batches of ``pairs`` that ``sampler`` (a TokenBatchSampler or any iterable of index
    lists) picks, collated: a DataLoader without workers."""
    for indices in sampler:
        yield collate_pairs([pairs[i] for i in indices])
