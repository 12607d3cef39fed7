"""Batched greedy decoding and sampling: at each step every row takes its most probable next token
(greedy), or draws it from the model's distribution (:func:`sample_decode`).

Shapes: B batch (sentences), K samples per sentence, R rows still decoding (R <= B * K), S source
length, T tokens produced so far, L the most tokens any row may produce, V target vocabulary, D
d_model.

With the key/value cache (the default) each step feeds only the newest token through the decoder;
``use_cache=False`` recomputes the whole prefix every step (the reference for tests and the
benchmark). A row stops at EOS or at its length limit; finished rows leave the batch, so later
steps only compute the rows still going, and the loop ends when no row is left. A target prefix
is forced through the same loop, and the repetition guards act on the logits before the choice
(:mod:`transformer.decoding.plan`, :mod:`transformer.decoding.guards`). Samples of one
sentence share its encoding and first step, and go their own ways from the first token on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from transformer.config.decoding import DecodeOptions
from transformer.decoding.bounds import mask_forbidden_, strip_padding
from transformer.decoding.fast_decoder import FastDecoder
from transformer.decoding.hypothesis import Hypothesis
from transformer.decoding.plan import Steering, options_of, plan
from transformer.decoding.ranking import argmax_rows, vocabulary_chunk
from transformer.decoding.session import Seq2SeqModel, Session, evaluation_mode, open_session

# a direct call's defaults (no length limit but max_len and the model's positions)
GREEDY: dict[str, Any] = {"beam_size": 1, "max_len_a": None, "max_len_b": 0}


def greedy_decode(
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
    on_token: Callable[[int], None] | None = None,
    use_cache: bool = True,
    pack_weights: bool = True,
    decoder: FastDecoder | None = None,
    precision: str = "fp32",
    **fields: Any,
) -> list[list[int]] | list[Hypothesis]:
    """Greedy translations of ``src`` (B, S), a batch of source ids padded with the model's pad id.

    Returns one list of target ids per row, without BOS and EOS. How to decode is ``options``
    (:class:`~transformer.config.decoding.DecodeOptions`; None: no length limit but the model's
    positions), with ``max_len`` and any other ``fields`` of it (or the short names of
    :data:`~transformer.decoding.plan.KERNEL_NAMES`: ``min_len``) replaced: a row produces at
    most ``max_len`` tokens (EOS included; None: the model's ``max_len``), and with ``max_len_a``
    at most ``floor(max_len_a * source_length + max_len_b)`` rounded up to a multiple of 16, the
    source length counting non-pad tokens. EOS is not allowed before ``min_length`` tokens
    (useful to force lengths in benchmarks). ``no_repeat_ngram`` and ``repetition_penalty``:
    Hugging Face's repetition guards (:mod:`transformer.decoding.guards`). Beam and sampling
    fields are not read. PAD is never produced. Runs in evaluation mode under
    ``torch.inference_mode``.

    ``prefixes``: one list of target ids per row that its output starts with (forced, not
    decoded; its limit is raised to hold it and one more token). ``forbid``: token sequences no
    output contains (the options' ``forbid`` phrases as the target tokenizer encodes them).
    ``hypotheses``: return one :class:`~transformer.decoding.hypothesis.Hypothesis` per row instead
    (ids and the model's log-probability).

    With the cache, a ``Transformer`` is decoded by the fast path
    (:class:`~transformer.decoding.fast_decoder.FastDecoder`; ``pack_weights``: on a CPU in
    float32 multiply by weights reordered once for oneDNN, equal up to float32 rounding, faster).
    ``decoder``: a ``FastDecoder(model)`` to use, so that a caller decoding many batches packs the
    weights once (``pack_weights`` is then the decoder's). ``precision="int8"``: the decoder's
    linear layers and output projection multiply by int8 weights (a float32 model on a CPU; close
    to float32, not equal); a bf16 model is decoded in bf16 as it is.

    ``on_token``: called with each token id as it is chosen (a forced prefix's included, EOS
    last when it ends the row), for a batch of one row: what a stream shows as it is made.
    """
    opts = options_of(options, GREEDY, fields if max_len is None else {**fields, "max_len": max_len})
    if opts.sampling:
        raise ValueError("sampling: greedy_decode takes the best token; sample_decode draws")
    limits, steering = plan(model, src, opts, prefixes=prefixes, forbid=forbid, log_probs=hypotheses)
    found = _decode(model, src, limits, steering, bos_id=bos_id, eos_id=eos_id, use_cache=use_cache,
                    pack_weights=pack_weights, decoder=decoder, precision=precision,
                    on_token=on_token)
    return [row[0] for row in found] if hypotheses else [row[0].ids for row in found]


def sample_decode(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    seed: int,
    keys: Sequence[object] | None = None,
    max_len: int | None = None,
    options: DecodeOptions | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
    forbid: Sequence[Sequence[int]] | None = None,
    use_cache: bool = True,
    pack_weights: bool = True,
    decoder: FastDecoder | None = None,
    precision: str = "fp32",
    on_token: Callable[[int], None] | None = None,
    **fields: Any,
) -> list[list[Hypothesis]]:
    """``nbest`` (short name ``samples``; default 1) translations of each row of ``src`` (B, S),
    each token drawn from the model's distribution after ``temperature``, ``sampling_topk`` (short
    name ``top_k``; 0: no cut) and ``sampling_topp`` (``top_p``; 1: no cut), as Hugging Face's
    ``do_sample`` defines them (:mod:`transformer.decoding.sampling`). Returns per row its samples
    as :class:`~transformer.decoding.hypothesis.Hypothesis`, most probable first.

    The draws of row b come from ``seed`` and ``keys[b]`` alone (default: b), so a sentence
    given the same key gets the same samples in any batch. ``top_k=1`` is greedy decoding (but
    where the best logits tie exactly: top-k keeps ties). The other arguments are
    :func:`greedy_decode`'s (``on_token``: one row and one sample).
    """
    changes = {"sampling": True, **fields} if max_len is None else {"sampling": True, **fields, "max_len": max_len}
    opts = options_of(options, GREEDY, changes)
    limits, steering = plan(model, src, opts, prefixes=prefixes, forbid=forbid, keys=keys, seed=seed,
                            log_probs=True)
    found = _decode(model, src, limits, steering, bos_id=bos_id, eos_id=eos_id, use_cache=use_cache,
                    pack_weights=pack_weights, decoder=decoder, precision=precision,
                    on_token=on_token)
    return [sorted(row, key=lambda h: -h.log_prob) for row in found]


def _decode(model: Seq2SeqModel, src: Tensor, limits: Tensor, steering: Steering, *, bos_id: int,
            eos_id: int, use_cache: bool, pack_weights: bool,
            decoder: FastDecoder | None, precision: str,
            on_token: Callable[[int], None] | None = None) -> list[list[Hypothesis]]:
    """Open the session and run the loop; the K hypotheses of each row (log-probabilities 0 when
    ``steering`` does not keep them)."""
    if on_token is not None and (src.size(0) != 1 or steering.samples != 1):
        raise ValueError(f"on_token: one row and one sample, not {src.size(0)} x {steering.samples}")
    pad_id = model.config.pad_id
    with torch.inference_mode(), evaluation_mode(model):
        session = open_session(model, src, use_cache=use_cache, pack_weights=pack_weights,
                               decoder=decoder, precision=precision)
        tokens, log_probs, lengths = _greedy(session, src, limits, bos_id=bos_id, eos_id=eos_id,
                                             pad_id=pad_id, steering=steering, on_token=on_token)
    k = steering.samples
    if steering.prefix is not None:  # a score counts the tokens after the prefix
        lengths = lengths - steering.prefix.lengths.repeat_interleave(k)
    ids = strip_padding(tokens.tolist(), pad_id=pad_id)
    totals, counts = log_probs.tolist(), lengths.tolist()
    found = [Hypothesis(ids[i], totals[i], totals[i], counts[i]) for i in range(len(ids))]
    return [found[b * k : (b + 1) * k] for b in range(src.size(0))]


@dataclass
class _Rows:
    """The rows still decoding (R of them) and what each carries."""

    index: Tensor  # (R,) long: its row of the output, b * K + k
    limits: Tensor  # (R,) long: the most tokens it may produce
    history: Tensor  # (R, 1 + L) long: BOS, then its tokens; column t is the input at step t
    log_probs: Tensor | None  # (R,) float32: the model's log-probability of its decoded tokens

    def take(self, keep: Tensor) -> _Rows:
        """Rows ``keep`` (R',) of these, in that order (repeats allowed)."""
        return _Rows(self.index[keep], self.limits[keep], self.history[keep],
                     None if self.log_probs is None else self.log_probs[keep])


def _greedy(
    session: Session,
    src: Tensor,
    limits: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    steering: Steering,
    on_token: Callable[[int], None] | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The decoding loop; returns the produced ids (B * K, L), PAD where EOS or nothing was
    produced, each row's log-probability (B * K,) (zeros unless ``steering.log_probs``) and how
    many tokens it produced, EOS included (B * K,).

    A row is written to the output only when it ends, so that a step costs few operator calls
    besides the model's."""
    b, k = src.size(0), steering.samples
    steps = int(limits.max())
    out = src.new_full((b * k, steps), pad_id)  # (B * K, L)
    found_log_probs = torch.zeros(b * k, device=src.device)  # (B * K,)
    found_lengths = torch.zeros(b * k, dtype=torch.long, device=src.device)  # (B * K,)
    tracked = torch.zeros(b, device=src.device) if steering.log_probs else None
    rows = _Rows(torch.arange(b, device=src.device), limits, src.new_full((b, steps + 1), bos_id), tracked)
    next_limit = int(limits.min())  # the first step at which a row reaches its limit
    chunk: int | None = None  # for argmax_rows, chosen on the first step
    for t in range(steps):
        tokens = rows.history[:, : t + 1] if session.needs_prefix else rows.history[:, t : t + 1]
        logits = session.step(tokens)  # (R, V)
        if t == 0:
            chunk = vocabulary_chunk(logits.size(-1))
            if k > 1:  # a sentence's samples share its first step, then go their own ways
                expand = torch.arange(b, device=src.device).repeat_interleave(k)  # (B * K,)
                logits, rows = logits[expand], rows.take(expand)
                rows.index = torch.arange(b * k, device=src.device)
                session.select(expand, keep=expand, beams=1)
        next_ids, log_probs = _choose(logits, rows, t, steering=steering, chunk=chunk,
                                      pad_id=pad_id, eos_id=eos_id)  # (R,) each
        rows.history[:, t + 1] = next_ids
        if on_token is not None:  # one row (checked by _decode)
            on_token(int(next_ids[0]))
        if rows.log_probs is not None:
            rows.log_probs += log_probs
        ended = next_ids == eos_id  # (R,)
        at_limit = t + 1 == next_limit  # some row reaches its limit now
        if at_limit:
            ended |= rows.limits == t + 1
        if at_limit or bool(ended.any()):  # at least one row ends
            done = ended.nonzero().squeeze(1)  # (E,)
            produced = rows.history[done, 1 : t + 2]  # (E, t + 1): EOS, when it ended them, last
            out[rows.index[done], : t + 1] = produced.masked_fill(produced == eos_id, pad_id)
            if rows.log_probs is not None:
                found_log_probs[rows.index[done]] = rows.log_probs[done]
                found_lengths[rows.index[done]] = t + 1
            keep = (~ended).nonzero().squeeze(1)  # (R',)
            if keep.numel() == 0:
                break
            rows = rows.take(keep)
            session.select(keep, keep=keep, beams=1)
            next_limit = int(rows.limits.min())
    return out, found_log_probs, found_lengths


def _choose(logits: Tensor, rows: _Rows, step: int, *, steering: Steering, chunk: int | None,
            pad_id: int, eos_id: int) -> tuple[Tensor, Tensor | None]:
    """The next token of every row (R,) from its ``logits`` (R, V) (masked in place), and the
    model's log-probability of it (R,), 0 where the prefix forced it (None: not kept)."""
    sampler, tracked, min_len = steering.sampler, rows.log_probs is not None, steering.min_len
    # a plain draw (no temperature, cut or guard) computes the normaliser of the model's own
    # distribution on the way, but for the tokens masked below: keep their logits
    fused = tracked and sampler is not None and sampler.plain and not steering.guards
    masked = logits[:, [pad_id, eos_id] if step < min_len else [pad_id]].float() if fused else None
    # else the model's own distribution, before anything is masked or penalised (log_softmax
    # then a gather: on a CPU some 2x faster than logsumexp, whose exp is not vectorised)
    model = torch.log_softmax(logits.float(), dim=-1) if tracked and not fused else None  # (R, V)
    scores = mask_forbidden_(logits, step=step, pad_id=pad_id, eos_id=eos_id, min_len=min_len)
    if steering.guards:
        scores = steering.guard(scores, rows.history[:, : step + 1])  # a new tensor
    total = None
    if sampler is not None:
        assert steering.uniforms is not None
        uniforms = steering.uniforms[rows.index, step]  # (R,)
        if fused:
            next_ids, total = sampler.draw_plain(scores, uniforms)
        else:
            next_ids = sampler.draw(scores, uniforms)
    else:
        next_ids = argmax_rows(scores, chunk)  # (R,)
    forced = None
    if steering.prefix is not None and step < steering.prefix.longest:
        sentences = torch.div(rows.index, steering.samples, rounding_mode="floor")  # (R,)
        next_ids, forced = steering.prefix.force(next_ids, sentences, step)
    if not tracked:
        return next_ids, None
    if model is not None:
        log_probs = model.gather(1, next_ids[:, None]).squeeze(1)  # (R,)
    else:  # the chosen logit is the model's (only PAD and a forbidden EOS were masked)
        assert total is not None and masked is not None
        total = torch.logaddexp(total, masked.double().logsumexp(-1))  # (R,): the masked ones back
        log_probs = (logits.gather(1, next_ids[:, None]).squeeze(1).double() - total).float()
    return next_ids, log_probs if forced is None else log_probs.masked_fill(forced, 0.0)
