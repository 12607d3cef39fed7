"""Batched beam search with the key/value cache and the GNMT length penalty.

Shapes: B batch (sentences), N sentences still searching (N <= B), K beam size (1 on the first
step, when every sentence has only the BOS hypothesis), C = 2K candidates per sentence, S source
length, L the most tokens any sentence may produce, V target vocabulary, D d_model.

Each step extends every live hypothesis by every token and keeps the 2K best extensions of each
sentence by log-probability. Those of the top K that end in EOS (or that reach the length limit)
are finished: scored ``log_prob / ((5 + length) / 6) ** alpha`` (Wu et al., 2016, the length
counting EOS), frozen into the sentence's finished pool and never extended again. The K best
extensions that do not end in EOS stay live, and the self-attention caches are reordered to
follow them. A sentence is done once its pool holds K finished hypotheses and its best live
hypothesis, were it to end now, would score no better than the n-th best of the pool (n: the
n-best asked for, else 1; so ``beam_size=1`` is greedy decoding); done sentences leave the batch. The result is the pool sorted by score.
The decoder (a :mod:`transformer.decoding.session`) follows the chosen hypotheses: in the fast path
the beams of a sentence share one row of encoder memory and of cross-attention keys, reordered
only when sentences leave the batch, and the self-attention caches move slot numbers, not keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.decoding.common import (
    Seq2SeqModel,
    checked_limits,
    evaluation_mode,
    mask_forbidden_,
    strip_padding,
    vocabulary_chunk,
)
from transformer.decoding.fast_decoder import FastDecoder
from transformer.decoding.session import Session, open_session


@dataclass
class BeamState:
    """Everything beam search carries from one step to the next (besides the model's cache)."""

    rows: Tensor  # (N,) long: the batch row of each sentence still searching
    alive_tokens: Tensor  # (N, K, L) long: ids of the live hypotheses, PAD beyond the current step
    alive_log_probs: Tensor  # (N, K) float32: their log-probabilities
    finished_tokens: Tensor  # (B, K, L) long: ids of finished hypotheses without EOS, PAD-padded
    finished_scores: Tensor  # (B, K) float32: their length-penalised scores, sorted; -inf = empty


def gnmt_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty ``((5 + length) / 6) ** alpha``; 1 when ``alpha`` is 0."""
    return ((5.0 + length) / 6.0) ** alpha


def initial_state(src: Tensor, *, steps: int, beam_size: int, pad_id: int) -> BeamState:
    """One live hypothesis (just BOS, log-probability 0) per sentence and empty finished pools."""
    b = src.size(0)
    return BeamState(
        rows=torch.arange(b, device=src.device),
        alive_tokens=src.new_full((b, 1, steps), pad_id),
        alive_log_probs=torch.zeros(b, 1, device=src.device),
        finished_tokens=src.new_full((b, beam_size, steps), pad_id),
        finished_scores=torch.full((b, beam_size), -math.inf, device=src.device),
    )


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


def gather_beams(x: Tensor, beams: Tensor) -> Tensor:
    """Pick beams per sentence: ``x`` (N, K, ...) and ``beams`` (N, K') -> (N, K', ...)."""
    index = beams.view(*beams.shape, *([1] * (x.dim() - 2))).expand(*beams.shape, *x.shape[2:])
    return x.gather(1, index)


def extend(tokens: Tensor, beams: Tensor, new_tokens: Tensor, step: int) -> Tensor:
    """Hypotheses ``tokens`` (N, K, L) continued: pick ``beams`` (N, C), write ``new_tokens``
    (N, C) at ``step`` -> (N, C, L)."""
    out = gather_beams(tokens, beams)
    out[:, :, step] = new_tokens
    return out


def merge_finished(
    pool_tokens: Tensor, pool_scores: Tensor, new_tokens: Tensor, new_scores: Tensor
) -> tuple[Tensor, Tensor]:
    """Keep the K best of a finished pool (N, K, L)/(N, K) and new finished hypotheses
    (N, C, L)/(N, C) (-inf scores are not hypotheses). Returns the new pool, best first."""
    k = pool_scores.size(1)
    scores = torch.cat([pool_scores, new_scores], dim=1)  # (N, K + C)
    best, index = scores.topk(k, dim=1)  # (N, K)
    return gather_beams(torch.cat([pool_tokens, new_tokens], dim=1), index), best


def select_live(scores: Tensor, ends_eos: Tensor, beam_size: int) -> tuple[Tensor, Tensor]:
    """The K best candidates (N, C) that do not end in EOS: their positions (N, K) and scores
    (N, K). When C < K (a vocabulary smaller than the beam) all C are kept, those ending in EOS
    with score -inf so that they can never finish."""
    count = min(beam_size, scores.size(1))
    best, index = scores.masked_fill(ends_eos, -math.inf).topk(count, dim=1)
    return index, best


def beam_step(
    state: BeamState,
    log_probs: Tensor,
    *,
    step: int,
    beam_size: int,
    alpha: float,
    eos_id: int,
    pad_id: int,
    at_limit: Tensor,
    chunk: int | None = None,
    wanted: int = 1,
) -> tuple[BeamState, Tensor, Tensor]:
    """Advance the search by one token.

    ``log_probs`` (N, K, V) are the next-token log-probabilities of the live hypotheses,
    ``at_limit`` (N,) marks sentences whose length limit this step reaches. Returns the new state,
    the beam each new live hypothesis extends as a row of the old (N * K) batch, (N * K',), and
    which sentences are done (N,). Sentences are not removed here. ``chunk``: as in
    :func:`top_candidates`; ``wanted``: how many of the best finished hypotheses the caller keeps
    (its n-best), the ones a live hypothesis must be unable to displace for the search to end.
    """
    n, k_old, _ = log_probs.shape
    scores, beams, tokens = top_candidates(log_probs, state.alive_log_probs, 2 * beam_size, chunk=chunk)  # (N, C)
    ends_eos = tokens == eos_id  # (N, C)
    # only EOS among the top K counts (so beam 1 is greedy); at the limit all of the top K finish
    top_k = torch.arange(scores.size(1), device=scores.device) < beam_size  # (C,)
    finishing = top_k & (ends_eos | at_limit[:, None]) & (scores > -math.inf)  # (N, C)
    finished_tokens, finished_scores = state.finished_tokens, state.finished_scores
    if bool(finishing.any()):
        new_scores = torch.where(finishing, scores / gnmt_penalty(step + 1, alpha), -math.inf)
        new_tokens = extend(state.alive_tokens, beams, tokens.masked_fill(ends_eos, pad_id), step)
        pool_tokens, pool_scores = merge_finished(
            finished_tokens[state.rows], finished_scores[state.rows], new_tokens, new_scores
        )
        finished_tokens = finished_tokens.index_put((state.rows,), pool_tokens)
        finished_scores = finished_scores.index_put((state.rows,), pool_scores)
    live, live_scores = select_live(scores, ends_eos, beam_size)  # (N, K) each, best first
    # Done when the pool is full and the best live hypothesis, were it to end now, would not be
    # among the ``wanted`` best finished (as Hugging Face's default, early_stopping=False, with the
    # pool's worst). A full pool alone is not enough: unlikely hypotheses that end early can fill
    # it while a far likelier one is still growing.
    pool = finished_scores[state.rows]  # (N, K), best first
    full = (pool > -math.inf).all(dim=1)  # (N,)
    best_live = live_scores[:, 0] / gnmt_penalty(step + 1, alpha)  # (N,)
    done = (full & (best_live <= pool[:, min(wanted, pool.size(1)) - 1])) | at_limit  # (N,)

    live_beams = beams.gather(1, live)  # (N, K)
    state = BeamState(
        rows=state.rows,
        alive_tokens=extend(state.alive_tokens, live_beams, tokens.gather(1, live), step),
        alive_log_probs=live_scores,
        finished_tokens=finished_tokens,
        finished_scores=finished_scores,
    )
    offsets = torch.arange(n, device=beams.device)[:, None] * k_old  # (N, 1)
    return state, (offsets + live_beams).view(-1), done


def keep_sentences(state: BeamState, keep: Tensor) -> BeamState:
    """Drop the sentences that are done: keep positions ``keep`` (N',) of the live ones."""
    return BeamState(
        rows=state.rows[keep],
        alive_tokens=state.alive_tokens[keep],
        alive_log_probs=state.alive_log_probs[keep],
        finished_tokens=state.finished_tokens,
        finished_scores=state.finished_scores,
    )


def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int | None = None,
    beam_size: int = 5,
    length_penalty: float = 0.6,
    nbest: int | None = None,
    max_len_a: float | None = None,
    max_len_b: int = 0,
    min_len: int = 0,
    use_cache: bool = True,
    pack_weights: bool = True,
    decoder: FastDecoder | None = None,
    precision: str = "fp32",
) -> list[list[int]] | list[list[tuple[list[int], float]]]:
    """Beam search translations of ``src`` (B, S), source ids padded with the model's pad id.

    Returns the best target ids per row, without BOS and EOS; with ``nbest=k`` (k <= beam_size),
    k ``(ids, score)`` pairs per row instead, best first (fewer only when the vocabulary allows
    fewer hypotheses), the score being the log-probability divided by
    ``((5 + length) / 6) ** length_penalty`` (length in tokens, EOS included).
    ``max_len``, ``max_len_a``/``max_len_b``, ``min_len``, ``use_cache``, ``pack_weights``,
    ``decoder`` and ``precision`` work as in
    :func:`transformer.decoding.greedy_decode`. Runs in evaluation mode under
    ``torch.inference_mode``.
    """
    limits = checked_limits(model, src, max_len=max_len, max_len_a=max_len_a, max_len_b=max_len_b,
                            min_len=min_len)  # (B,)
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}")
    if nbest is not None and (isinstance(nbest, bool) or not isinstance(nbest, int) or not 1 <= nbest <= beam_size):
        raise ValueError(f"nbest must be an integer from 1 to beam_size={beam_size}, got {nbest!r}")
    if not math.isfinite(length_penalty) or length_penalty < 0:
        raise ValueError(f"length_penalty must be a non-negative number, got {length_penalty!r}")
    pad_id = model.config.pad_id
    with torch.inference_mode(), evaluation_mode(model):
        session = open_session(model, src, use_cache=use_cache, pack_weights=pack_weights,
                               decoder=decoder, precision=precision)
        state = _search(session, src, limits, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id,
                        beam_size=beam_size, alpha=length_penalty, min_len=min_len,
                        wanted=nbest or 1)
    count = 1 if nbest is None else nbest
    tokens = strip_padding(state.finished_tokens[:, :count].flatten(0, 1).tolist(), pad_id=pad_id)
    scores = state.finished_scores[:, :count].flatten().tolist()
    if nbest is None:
        return tokens
    return [
        [(tokens[i], scores[i]) for i in range(row * count, (row + 1) * count) if scores[i] > -math.inf]
        for row in range(src.size(0))
    ]


def _search(
    session: Session,
    src: Tensor,
    limits: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    beam_size: int,
    alpha: float,
    min_len: int,
    wanted: int = 1,
) -> BeamState:
    """The search loop; returns the final state, whose finished pools hold the results."""
    steps = int(limits.max())
    state = initial_state(src, steps=steps, beam_size=beam_size, pad_id=pad_id)
    chunk: int | None = None  # for top_candidates, chosen on the first step
    for t in range(steps):
        n, k = state.alive_log_probs.shape
        if session.needs_prefix:
            bos = src.new_full((n * k, 1), bos_id)
            tokens = torch.cat([bos, state.alive_tokens[:, :, :t].reshape(n * k, t)], dim=1)  # (N * K, t + 1)
        elif t == 0:
            tokens = src.new_full((n, 1), bos_id)  # (N, 1)
        else:
            tokens = state.alive_tokens[:, :, t - 1].reshape(n * k, 1)  # (N * K, 1)
        logits = session.step(tokens)  # (N * K, V)
        log_probs = torch.log_softmax(logits.float(), dim=-1).view(n, k, -1)  # (N, K, V)
        if t == 0:
            chunk = vocabulary_chunk(log_probs.size(-1))  # once per search: the vocabulary is fixed
        mask_forbidden_(log_probs, step=t, pad_id=pad_id, eos_id=eos_id, min_len=min_len)
        at_limit = limits[state.rows] == t + 1  # (N,)
        state, index, done = beam_step(
            state, log_probs, step=t, beam_size=beam_size, alpha=alpha, eos_id=eos_id,
            pad_id=pad_id, at_limit=at_limit, chunk=chunk, wanted=wanted,
        )  # index (N * K,) rows of the old batch that the new live hypotheses extend
        keep = None
        if bool(done.any()):
            keep = (~done).nonzero().squeeze(1)  # (N',)
            if keep.numel() == 0:
                break
            state = keep_sentences(state, keep)
            index = index.view(n, -1)[keep].view(-1)  # (N' * K,)
        session.select(index, keep=keep, beams=state.alive_log_probs.size(1))
    return state
