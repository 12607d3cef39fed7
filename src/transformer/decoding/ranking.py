"""Ranking a step's scores fast on a CPU: the first maximum of each row (greedy decoding, constrained
beams) and the best one-token extensions of live hypotheses (beam search), both exact, in two rounds
over chunks of the vocabulary where that pays.

Shapes: R rows, N sentences, K hypotheses per sentence, V target vocabulary, C candidates.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer.decoding import thresholds as _thresholds


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
