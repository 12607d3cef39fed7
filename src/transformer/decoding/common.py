"""Pieces that greedy decoding, sampling and beam search share: argument checks, output-length
limits, masking of tokens that may not be produced, evaluation mode for the duration of a search,
and the :class:`Hypothesis` they return when asked for scores.

Shapes: B batch (sentences), S source length, R rows being decoded, V target vocabulary.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn

from transformer.decoding import thresholds as _thresholds
from transformer.model.kv_cache import DecoderCache


@dataclass(frozen=True)
class Hypothesis:
    """One translation a search found. ``ids``: target ids without BOS and EOS (a target prefix
    included). ``log_prob``: the model's log-probability of the tokens it chose after the prefix,
    EOS included: the sum of their log-softmax under the model's own logits, before any
    temperature, cut, repetition guard or length penalty (what forced decoding of ``ids`` gives,
    the prefix's tokens aside); ``tokens``: how many tokens that sums over. ``score``: what the
    search ranked by (beam search: the guarded log-probability over the GNMT length penalty;
    greedy decoding and sampling: ``log_prob``)."""

    ids: list[int]
    score: float
    log_prob: float
    tokens: int

    @property
    def log_prob_per_token(self) -> float:
        """``log_prob / tokens`` (0 when no token was chosen)."""
        return self.log_prob / self.tokens if self.tokens else 0.0


class Seq2SeqModel(Protocol):
    """What the reference decoding (:class:`~transformer.decoding.session.ReferenceSession`) needs
    from a model (``transformer.Transformer`` has it): one row of ``memory`` and ``src`` per row of
    ``tgt_in``, and a cache that ``DecoderCache.reorder`` follows the chosen rows in."""

    config: object  # with .pad_id and .max_len

    def encode(self, src: Tensor) -> Tensor: ...

    def decode(
        self, tgt_in: Tensor, memory: Tensor | None, src: Tensor, *, cache: DecoderCache | None = None
    ) -> Tensor: ...

    def new_cache(self) -> DecoderCache: ...


def check_source(src: Tensor) -> None:
    """``src`` must be a (B, S) tensor of integer token ids with S >= 1."""
    if not isinstance(src, Tensor) or src.dim() != 2:
        raise ValueError(f"src must be a (batch, length) tensor of token ids, got {_describe(src)}")
    if src.dtype.is_floating_point or src.dtype == torch.bool or src.dtype.is_complex:
        raise ValueError(f"src must hold integer token ids, got dtype {src.dtype}")
    if src.size(1) == 0:
        raise ValueError("src has length 0; pad empty sentences to length 1 with the pad id")


def _describe(x: object) -> str:
    return f"shape {tuple(x.shape)}" if isinstance(x, Tensor) else type(x).__name__


def output_limits(
    src: Tensor,
    *,
    pad_id: int,
    max_len: int | None,
    max_len_a: float | None,
    max_len_b: int,
    model_max_len: int,
) -> Tensor:
    """The most tokens each row may produce, EOS included: (B,) long.

    ``max_len`` is an absolute cap (None: the model's ``max_len``). With ``max_len_a``, each row is
    also capped at ``floor(a * source_length + b)``, where the source length counts non-pad
    tokens. No row goes beyond the model's ``max_len`` (the positions it can encode) or below 1.
    """
    if max_len is not None and (isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1):
        raise ValueError(f"max_len must be a positive integer or None, got {max_len!r}")
    if max_len_a is not None and (not math.isfinite(max_len_a) or max_len_a < 0):
        raise ValueError(f"max_len_a must be a non-negative number or None, got {max_len_a!r}")
    cap = model_max_len if max_len is None else min(max_len, model_max_len)
    if max_len_a is None:
        return torch.full((src.size(0),), cap, dtype=torch.long, device=src.device)
    src_len = (src != pad_id).sum(dim=1)  # (B,)
    limits = torch.floor(src_len.double() * max_len_a + max_len_b).long()  # (B,)
    return limits.clamp(min=1, max=cap)


def mask_forbidden_(scores: Tensor, *, step: int, pad_id: int, eos_id: int, min_len: int) -> Tensor:
    """Forbid, in place, the tokens that may not come next: scores (..., V) -> the same tensor.

    PAD is never produced: it is not a word, and a PAD inside a prefix would be masked out when the
    prefix is recomputed but not when it sits in the cache, so cached and uncached decoding would
    part ways. EOS is forbidden while fewer than ``min_len`` tokens have been produced.
    """
    scores[..., pad_id] = -math.inf
    if step < min_len:
        scores[..., eos_id] = -math.inf
    return scores


def strip_padding(rows: list[list[int]], *, pad_id: int) -> list[list[int]]:
    """Cut each list of ids at its first ``pad_id`` (decoders never produce PAD as a token)."""
    out = []
    for row in rows:
        try:
            out.append(row[: row.index(pad_id)])
        except ValueError:
            out.append(row)
    return out


@contextlib.contextmanager
def evaluation_mode(model: nn.Module) -> Iterator[None]:
    """Dropout off while decoding (it would make the search random); each module's mode is
    restored after. Only modules in training mode are switched: a model already in evaluation
    mode (every call of a translator) costs one walk over its modules, not two calls of
    ``train()``, which would set every module's mode twice (a millisecond at batch 1)."""
    training = [m for m in model.modules() if m.training]
    for module in training:
        module.training = False
    try:
        yield
    finally:
        for module in training:
            module.training = True


def vocabulary_chunk(vocab_size: int) -> int | None:
    """A divisor of ``vocab_size`` from 32 to 512 for :func:`top_candidates`, or None when there is
    none or the vocabulary holds fewer than 16 chunks (ranking it at once is then as fast).

    Preferred: multiples of 32 (a CPU max over rows of 32k floats is vectorised; what is left
    over goes element by element, 5x slower for 125 than 128), then the one nearest 160
    (8000 -> 160, 32000 -> 160).
    """
    divisors = [d for d in range(32, 513) if vocab_size % d == 0 and vocab_size // d >= 16]
    return min(divisors, key=lambda d: (-min(d & -d, 32), abs(d - 160))) if divisors else None


def argmax_rows(scores: Tensor, chunk: int | None, *, min_scores: int | None = None) -> Tensor:
    """``scores.argmax(dim=-1)`` of ``scores`` (R, V), the first maximum of each row, in two rounds
    when there are at least ``min_scores`` scores (None: this machine's ``argmax_min_scores``,
    :mod:`transformer.decoding.thresholds`) and ``chunk`` (from :func:`vocabulary_chunk`) divides
    V: the chunk holding a row's first maximum is the first chunk whose maximum is that row's
    maximum, and within it the first maximum is the row's. Two rounds pay from a few rows:
    PyTorch's CPU argmax goes element by element (Zen 4: 72 us for 16 rows of 8000) while a max
    over chunks is vectorised (22 us); at one row of 8000 the plain argmax is faster."""
    rows, v = scores.shape
    if min_scores is None:
        min_scores = _thresholds.decoding_thresholds().argmax_min_scores
    if chunk is None or rows * v < min_scores:
        return scores.argmax(dim=-1)
    chunks = scores.view(rows, v // chunk, chunk)  # (R, M, chunk)
    best = chunks.amax(dim=-1).argmax(dim=-1)  # (R,): the chunk of each row's first maximum
    within = chunks.gather(1, best[:, None, None].expand(rows, 1, chunk)).squeeze(1).argmax(dim=-1)
    return best * chunk + within  # (R,)


def top_candidates(
    log_probs: Tensor, alive_log_probs: Tensor, count: int, *, chunk: int | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """The ``count`` best one-token extensions of each sentence's live hypotheses.

    ``log_probs`` (N, K, V) next-token log-probabilities, ``alive_log_probs`` (N, K). Returns
    their total log-probabilities (N, C), the beam each extends (N, C) and the token (N, C),
    best first.

    Ranking all K * V extensions at once (``topk`` over rows of 40,000 for beam 5 and 8,000
    tokens) is slow on a CPU, so they are ranked in two rounds, exactly: the vocabulary of each
    hypothesis is cut into chunks of ``chunk`` tokens (:func:`vocabulary_chunk` chooses one), and
    only the ``count`` chunks with the best maxima are searched, since any extension among the
    best ``count`` lies in one of them (were its chunk not among them, ``count`` better chunk
    maxima would be ``count`` better extensions). ``chunk`` must divide V; without a chunk (a
    small or prime vocabulary) all extensions are ranked at once.
    """
    n, k, v = log_probs.shape
    count = min(count, k * v)
    if chunk is not None and (chunk < 1 or v % chunk):
        raise ValueError(f"chunk={chunk} does not divide the vocabulary size {v}")
    if chunk is None or k * (v // chunk) <= count:
        total = (alive_log_probs[:, :, None] + log_probs).view(n, k * v)  # (N, K * V)
        scores, flat = total.topk(count, dim=1)  # (N, C)
        return scores, torch.div(flat, v, rounding_mode="floor"), flat % v
    per_row = v // chunk  # M chunks per hypothesis
    maxima = log_probs.view(n, k, per_row, chunk).amax(dim=-1) + alive_log_probs[:, :, None]  # (N, K, M)
    _, best = maxima.view(n, k * per_row).topk(count, dim=1)  # (N, C): chunk ids in the sentence
    values = log_probs.view(n, k * per_row, chunk).gather(1, best[:, :, None].expand(-1, -1, chunk))  # (N, C, chunk)
    beams = torch.div(best, per_row, rounding_mode="floor")  # (N, C)
    values = values + alive_log_probs.gather(1, beams)[:, :, None]
    scores, picked = values.view(n, count * chunk).topk(count, dim=1)  # (N, C)
    flat = best.gather(1, torch.div(picked, chunk, rounding_mode="floor")) * chunk + picked % chunk
    return scores, torch.div(flat, v, rounding_mode="floor"), flat % v
