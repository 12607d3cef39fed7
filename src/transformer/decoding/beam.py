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
A target prefix is forced through the same steps (:mod:`transformer.decoding.plan`: while a
sentence is within its prefix, its beams may only take the prefix's token, at no cost), and the
repetition guards act on the log-probabilities before the ranking, as Hugging Face's beam search
applies them (:mod:`transformer.decoding.guards`); the model's own log-probability of each
hypothesis is kept beside its score.
The decoder (a :mod:`transformer.decoding.session`) follows the chosen hypotheses: in the fast path
the beams of a sentence share one row of encoder memory and of cross-attention keys, reordered
only when sentences leave the batch, and the self-attention caches move slot numbers, not keys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from transformer.config.decoding import DecodeOptions
from transformer.decoding.bounds import mask_forbidden_, strip_padding
from transformer.decoding.constraints import Constraints, Progress, dealt_candidates
from transformer.decoding.fast_decoder import FastDecoder
from transformer.decoding.hypothesis import Hypothesis
from transformer.decoding.plan import Steering, TargetPrefix, options_of, plan
from transformer.decoding.ranking import top_candidates, vocabulary_chunk
from transformer.decoding.session import Seq2SeqModel, Session, evaluation_mode, open_session


@dataclass
class BeamState:
    """Everything beam search carries from one step to the next (besides the model's cache)."""

    rows: Tensor  # (N,) long: the batch row of each sentence still searching
    alive_tokens: Tensor  # (N, K, L) long: ids of the live hypotheses, PAD beyond the current step
    alive_log_probs: Tensor  # (N, K) float32: their log-probabilities (after the guards)
    finished_tokens: Tensor  # (B, K, L) long: ids of finished hypotheses without EOS, PAD-padded
    finished_scores: Tensor  # (B, K) float32: their length-penalised scores, sorted; -inf = empty
    finished_log_probs: Tensor  # (B, K) float32: the model's log-probability of each (no guard)
    finished_lengths: Tensor  # (B, K) long: the tokens that counts (after the prefix, EOS included)
    # (N, K) float32: the model's log-probabilities of the live hypotheses, where the guards make
    # them differ from alive_log_probs (None: they are alive_log_probs)
    alive_model_log_probs: Tensor | None = None
    # how far the live hypotheses are through their constraints (None: no constraints)
    progress: Progress | None = None


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
        finished_log_probs=torch.full((b, beam_size), -math.inf, device=src.device),
        finished_lengths=torch.zeros((b, beam_size), dtype=torch.long, device=src.device),
    )


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
    pool_tokens: Tensor, pool_scores: Tensor, new_tokens: Tensor, new_scores: Tensor,
    *carried: tuple[Tensor, Tensor],
) -> tuple[Tensor, ...]:
    """Keep the K best of a finished pool (N, K, L)/(N, K) and new finished hypotheses
    (N, C, L)/(N, C) (-inf scores are not hypotheses). ``carried``: pairs (pool (N, K, ...), new
    (N, C, ...)) of what else each hypothesis holds, kept alongside. Returns the new pool's
    tokens, scores and carried values, best first."""
    k = pool_scores.size(1)
    scores = torch.cat([pool_scores, new_scores], dim=1)  # (N, K + C)
    best, index = scores.topk(k, dim=1)  # (N, K)
    kept = [gather_beams(torch.cat([pool, new], dim=1), index) for pool, new in carried]
    return gather_beams(torch.cat([pool_tokens, new_tokens], dim=1), index), best, *kept


def select_live(scores: Tensor, ends_eos: Tensor, beam_size: int,
                priority: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The K best candidates (N, C) that do not end in EOS (best by ``priority`` (N, C) when
    given, else by score): their positions (N, K) and scores (N, K). When C < K (a vocabulary
    smaller than the beam) all C are kept, those ending in EOS with score -inf so that they can
    never finish."""
    count = min(beam_size, scores.size(1))
    if priority is None:
        best, index = scores.masked_fill(ends_eos, -math.inf).topk(count, dim=1)
        return index, best
    index = priority.masked_fill(ends_eos, -math.inf).topk(count, dim=1).indices
    return index, scores.gather(1, index).masked_fill(ends_eos.gather(1, index), -math.inf)


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
    model_log_probs: Tensor | None = None,
    length: Tensor | None = None,
    constraints: Constraints | None = None,
) -> tuple[BeamState, Tensor, Tensor]:
    """Advance the search by one token.

    ``log_probs`` (N, K, V) are the next-token log-probabilities of the live hypotheses (after
    any guard: what is ranked), ``at_limit`` (N,) marks sentences whose length limit this step
    reaches. Returns the new state, the beam each new live hypothesis extends as a row of the old
    (N * K) batch, (N * K',), and which sentences are done (N,). Sentences are not removed here.
    ``chunk``: as in :func:`top_candidates`; ``wanted``: how many of the best finished
    hypotheses the caller keeps (its n-best), the ones a live hypothesis must be unable to
    displace for the search to end. ``model_log_probs`` (N, K, V): the model's own, where the
    guards changed ``log_probs`` (None: the same). ``length`` (N,): the tokens a hypothesis
    ending now counts, for the length penalty and its log-probability (None: ``step + 1``; less
    after a target prefix). ``constraints``: the phrases each sentence's output must hold
    (:mod:`transformer.decoding.constraints`; ``state.progress`` tracks them), dealing the beam
    across banks.
    """
    n, k_old, _ = log_probs.shape
    scores, beams, tokens, priority, top_k, progress, banks = _candidates(
        state, log_probs, beam_size=beam_size, chunk=chunk, constraints=constraints)  # (N, C) each
    model_scores = scores if model_log_probs is None else _model_totals(state, model_log_probs, beams, tokens)
    penalty = gnmt_penalty(step + 1 if length is None else length, alpha)  # a number, or (N,)
    ends_eos = tokens == eos_id  # (N, C)
    finishing = top_k & (ends_eos | at_limit[:, None]) & (scores > -math.inf)  # (N, C)
    if constraints is not None:  # EOS was blocked; at the limit, only the complete if any
        finishing = constraints.finishers(finishing, banks, state.rows,
                                          state.finished_scores[state.rows, 0] == -math.inf)
    # the finished pools: tokens, scores, the model's log-probabilities, lengths (B, K, ...)
    fin = (state.finished_tokens, state.finished_scores, state.finished_log_probs, state.finished_lengths)
    if bool(finishing.any()):
        column = penalty[:, None] if isinstance(penalty, Tensor) else penalty
        new_scores = torch.where(finishing, scores / column, -math.inf)
        new_tokens = extend(state.alive_tokens, beams, tokens.masked_fill(ends_eos, pad_id), step)
        lengths = torch.full_like(tokens, step + 1) if length is None else length[:, None].expand_as(tokens)  # (N, C)
        pool = merge_finished(fin[0][state.rows], fin[1][state.rows], new_tokens, new_scores,
                              (fin[2][state.rows], model_scores), (fin[3][state.rows], lengths))
        fin = tuple(old.index_put((state.rows,), new) for old, new in zip(fin, pool, strict=True))
    live, live_scores = select_live(scores, ends_eos, beam_size, priority)  # (N, K) each
    # Done when the pool is full and the best live hypothesis, were it to end now, would not be
    # among the ``wanted`` best finished (as Hugging Face's default, early_stopping=False, with the
    # pool's worst). A full pool alone is not enough: unlikely hypotheses that end early can fill
    # it while a far likelier one is still growing.
    pool_scores = fin[1][state.rows]  # (N, K), best first
    full = (pool_scores > -math.inf).all(dim=1)  # (N,)
    best_live = live_scores.amax(dim=1) / penalty  # (N,)
    done = (full & (best_live <= pool_scores[:, min(wanted, pool_scores.size(1)) - 1])) | at_limit  # (N,)

    live_beams = beams.gather(1, live)  # (N, K)
    state = BeamState(
        rows=state.rows,
        alive_tokens=extend(state.alive_tokens, live_beams, tokens.gather(1, live), step),
        alive_log_probs=live_scores,
        finished_tokens=fin[0],
        finished_scores=fin[1],
        finished_log_probs=fin[2],
        finished_lengths=fin[3],
        alive_model_log_probs=None if model_log_probs is None else model_scores.gather(1, live),
        progress=None if progress is None else progress.pick(live),
    )
    offsets = torch.arange(n, device=beams.device)[:, None] * k_old  # (N, 1)
    return state, (offsets + live_beams).view(-1), done


def _candidates(state: BeamState, log_probs: Tensor, *, beam_size: int, chunk: int | None,
                constraints: Constraints | None) -> tuple[Tensor, ...]:
    """A step's candidates (N, C): scores, beams, tokens, priority (None: by score), which are
    the top K (only EOS among them finishes, so beam 1 is greedy; at the limit all of them
    finish), their progress and banks (None without constraints)."""
    if constraints is None:
        scores, beams, tokens = top_candidates(log_probs, state.alive_log_probs, 2 * beam_size, chunk=chunk)
        top_k = (torch.arange(scores.size(1), device=scores.device) < beam_size)[None, :]  # (1, C)
        return scores, beams, tokens, None, top_k, None, None
    assert state.progress is not None
    return dealt_candidates(log_probs, state.alive_log_probs, constraints, state.progress, state.rows,
                            beam_size=beam_size, chunk=chunk)


def _model_totals(state: BeamState, model_log_probs: Tensor, beams: Tensor, tokens: Tensor) -> Tensor:
    """The model's log-probabilities (N, C) of candidates that extend ``beams`` (N, C) by
    ``tokens`` (N, C), from ``model_log_probs`` (N, K, V)."""
    alive = state.alive_log_probs if state.alive_model_log_probs is None else state.alive_model_log_probs
    n, _, v = model_log_probs.shape
    step = model_log_probs.view(n, -1).gather(1, beams * v + tokens)  # (N, C)
    return alive.gather(1, beams) + step


def keep_sentences(state: BeamState, keep: Tensor) -> BeamState:
    """Drop the sentences that are done: keep positions ``keep`` (N',) of the live ones."""
    alive_model = state.alive_model_log_probs
    return BeamState(
        rows=state.rows[keep],
        alive_tokens=state.alive_tokens[keep],
        alive_log_probs=state.alive_log_probs[keep],
        finished_tokens=state.finished_tokens,
        finished_scores=state.finished_scores,
        finished_log_probs=state.finished_log_probs,
        finished_lengths=state.finished_lengths,
        alive_model_log_probs=None if alive_model is None else alive_model[keep],
        progress=None if state.progress is None else state.progress.keep(keep),
    )


# a direct call's defaults: beam 5 (fairseq's), the paper's length penalty, no length limit but
# max_len and the model's positions
BEAM: dict[str, Any] = {"beam_size": 5, "length_penalty": 0.6, "max_len_a": None, "max_len_b": 0}


def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int | None = None,
    options: DecodeOptions | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
    forbid: Sequence[Sequence[int]] | None = None,
    hypotheses: bool = False,
    constraints: Sequence[Sequence[Sequence[int]]] | None = None,
    word_tails: Sequence[int] | None = None,
    use_cache: bool = True,
    pack_weights: bool = True,
    decoder: FastDecoder | None = None,
    precision: str = "fp32",
    **fields: Any,
) -> list[list[int]] | list[list[tuple[list[int], float]]] | list[list[Hypothesis]]:
    """Beam search translations of ``src`` (B, S), source ids padded with the model's pad id.

    How to search is ``options`` (:class:`~transformer.config.decoding.DecodeOptions`; None: beam
    5, length penalty 0.6, no length limit but the model's positions) with ``max_len`` and any other
    ``fields`` of it replaced (``beam_size=4``, ``nbest=2``; :func:`greedy_decode` says the rest).
    Returns the best target ids per row, without BOS and EOS; with ``nbest=k`` (k <= beam_size),
    k ``(ids, score)`` pairs per row instead, best first (fewer only when the vocabulary allows
    fewer hypotheses), the score being the log-probability divided by
    ``((5 + length) / 6) ** length_penalty`` (length in tokens, EOS included). ``prefixes``,
    ``forbid``, ``use_cache``, ``pack_weights``, ``decoder`` and ``precision`` work as in
    :func:`transformer.decoding.greedy_decode` (with a prefix, the length and the log-probability
    count the tokens after it; with a guard or a forbidden sequence, the score is the guarded
    log-probability's). ``hypotheses``: return the ``nbest`` (or 1) best of each row as
    :class:`~transformer.decoding.hypothesis.Hypothesis` (with the model's log-probability) instead.
    ``constraints``: target phrases (id lists) per row that its output must contain, in any order
    ([] for a row without; :mod:`transformer.decoding.constraints`); a row's length limit is
    raised by its phrases' tokens (up to the model's positions, where a hypothesis that reaches
    the limit ends even with a phrase unmet). Rows without phrases decode as without the argument;
    ``word_tails`` (ids of pieces that continue a word) never follow a phrase just met. Runs in
    evaluation mode under ``torch.inference_mode``.
    """
    opts = options_of(options, BEAM, fields if max_len is None else {**fields, "max_len": max_len})
    if opts.sampling:
        raise ValueError("sampling: beam search keeps the best hypotheses; sample_decode draws")
    nbest, beam_size, length_penalty = opts.nbest, opts.beam_size, opts.length_penalty
    limits, steering = plan(model, src, opts, prefixes=prefixes, forbid=forbid)
    pad_id = model.config.pad_id
    phrases = Constraints.of(constraints, rows=src.size(0), pad_id=pad_id, device=src.device,
                             word_tails=word_tails, vocab_size=model.config.tgt_vocab_size)
    if phrases is not None:
        limits = phrases.limits(limits, model_max_len=model.config.max_len)
    with torch.inference_mode(), evaluation_mode(model):
        session = open_session(model, src, use_cache=use_cache, pack_weights=pack_weights,
                               decoder=decoder, precision=precision)
        state = _search(session, src, limits, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id,
                        beam_size=beam_size, alpha=length_penalty, wanted=nbest or 1,
                        steering=steering, constraints=phrases)
    count = 1 if nbest is None else nbest
    tokens = strip_padding(state.finished_tokens[:, :count].flatten(0, 1).tolist(), pad_id=pad_id)
    scores = state.finished_scores[:, :count].flatten().tolist()
    if nbest is None and not hypotheses:
        return tokens
    log_probs = state.finished_log_probs[:, :count].flatten().tolist()
    lengths = state.finished_lengths[:, :count].flatten().tolist()

    def one(i: int) -> Hypothesis | tuple[list[int], float]:  # the i-th finished, as asked
        return Hypothesis(tokens[i], scores[i], log_probs[i], lengths[i]) if hypotheses else (tokens[i], scores[i])
    return [[one(i) for i in range(row * count, (row + 1) * count) if scores[i] > -math.inf]
            for row in range(src.size(0))]


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
    wanted: int = 1,
    steering: Steering | None = None,
    constraints: Constraints | None = None,
) -> BeamState:
    """The search loop; returns the final state, whose finished pools hold the results."""
    steering = steering or Steering()
    steps = int(limits.max())
    state = initial_state(src, steps=steps, beam_size=beam_size, pad_id=pad_id)
    if constraints is not None:
        state.progress = constraints.start(src.size(0))
    chunk: int | None = None  # for top_candidates, chosen on the first step
    for t in range(steps):
        n, k = state.alive_log_probs.shape
        if session.needs_prefix or steering.guards:
            bos = src.new_full((n * k, 1), bos_id)
            history = torch.cat([bos, state.alive_tokens[:, :, :t].reshape(n * k, t)], dim=1)  # (N * K, t + 1)
        if session.needs_prefix:
            tokens = history
        elif t == 0:
            tokens = src.new_full((n, 1), bos_id)  # (N, 1)
        else:
            tokens = state.alive_tokens[:, :, t - 1].reshape(n * k, 1)  # (N * K, 1)
        logits = session.step(tokens)  # (N * K, V)
        log_probs = torch.log_softmax(logits.float(), dim=-1).view(n, k, -1)  # (N, K, V)
        if t == 0:
            chunk = vocabulary_chunk(log_probs.size(-1))  # once per search: the vocabulary is fixed
        mask_forbidden_(log_probs, step=t, pad_id=pad_id, eos_id=eos_id, min_len=steering.min_len)
        model_log_probs, length = None, None
        if steering.guards:  # rank by the guarded log-probabilities, keep the model's beside them
            model_log_probs, log_probs = log_probs, steering.guard(log_probs.view(n * k, -1), history).view(n, k, -1)
        if steering.prefix is not None:
            log_probs, model_log_probs = _forced(steering.prefix, state.rows, t, log_probs, model_log_probs)
            length = (t + 1 - steering.prefix.lengths[state.rows]).clamp(min=1)  # (N,)
        if constraints is not None:  # no EOS before every phrase is met, no word tail after one
            within = None if steering.prefix is None else t < steering.prefix.lengths[state.rows]
            constraints.forbid_(log_probs, state.progress, state.rows, eos_id, within_prefix=within)
        at_limit = limits[state.rows] == t + 1  # (N,)
        state, index, done = beam_step(
            state, log_probs, step=t, beam_size=beam_size, alpha=alpha, eos_id=eos_id,
            pad_id=pad_id, at_limit=at_limit, chunk=chunk, wanted=wanted,
            model_log_probs=model_log_probs, length=length, constraints=constraints,
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


def _forced(prefix: TargetPrefix, rows: Tensor, step: int, log_probs: Tensor,
            model_log_probs: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """Both kinds of log-probabilities (N, K, V) with the prefix's token forced where a sentence
    of ``rows`` (N,) is still within its prefix."""
    if step >= prefix.longest:
        return log_probs, model_log_probs
    forced = prefix.force_beams(log_probs, rows, step)
    return forced, None if model_log_probs is None else prefix.force_beams(model_log_probs, rows, step)
