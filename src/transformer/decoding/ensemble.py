"""Ensembles at decoding: several models that share a target vocabulary decode together.

Shapes: N sentences, R rows being decoded (hypotheses), M members, V target vocabulary.

    ensemble = Ensemble([model_a, model_b])        # an nn.Module: evaluation mode reaches every member
    ids = beam_search(ensemble, src, bos_id=..., eos_id=...)   # greedy_decode, sample_decode alike

At each step every member gives the next-token log-probabilities of every row (its own
log-softmax) and the ensemble's scores are their mean, ``mean_m log p_m(y | prefix)``: the
members' log-probabilities averaged, a product of experts (OpenNMT-py's default; fairseq's
``EnsembleModel`` takes the log of the mean probability instead, ``logsumexp_m log p_m - log M``,
a mixture). The product is kept for its meaning: a token must be likely under every member, and
its scores are a sum of per-step log-probabilities like one model's. The
searches normalise what a session gives with a log-softmax, so the ensemble's distribution is
``p(y) = exp(mean_m log p_m(y)) / Z``: its scores are log-probabilities of a proper distribution,
and sampling draws from it (the mean of the members' raw logits would give the same
distribution: each log-softmax differs from its logits by one number per row). One member is
that model itself (the ensemble adds nothing, not even a rounding).

Every member keeps its own decoding session (:mod:`transformer.decoding.session`): its own
encoder memory and key/value cache, and its own :class:`~transformer.decoding.fast_decoder.FastDecoder`
(weights packed once, for every batch); each search's choice of rows is passed to all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from transformer.decoding.fast_decoder import FastDecoder, decoder_for
from transformer.decoding.session import ReferenceSession, Session


class Ensemble(nn.Module):
    """Models decoded together (at least one). They must agree on the target vocabulary size,
    the padding id and whether they are encoder-decoders; ``config`` is the first member's with
    ``max_len`` the smallest of theirs (every member must hold every position decoded)."""

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        first = members[0].config
        for i, member in enumerate(members[1:], start=2):
            config = member.config
            for name in ("tgt_vocab_size", "pad_id"):
                if getattr(config, name) != getattr(first, name):
                    raise ValueError(f"ensemble member {i}: {name} {getattr(config, name)} differs "
                                     f"from the first member's {getattr(first, name)}")
        self.members = nn.ModuleList(members)
        self.config = dataclasses.replace(first, max_len=min(m.config.max_len for m in members))
        # each member's fast path, per (pack_weights, precision): packed once for every batch
        self._decoders: dict[tuple[bool, str], list[FastDecoder | None]] = {}

    def decoders(self, *, pack_weights: bool = True, precision: str = "fp32") -> list[FastDecoder | None]:
        """Every member's :class:`FastDecoder` (None for a member that is not a ``Transformer``),
        made on the first call for these settings and kept."""
        key = (pack_weights, precision)
        if key not in self._decoders:
            self._decoders[key] = [decoder_for(m, pack_weights=pack_weights, precision=precision)
                                   for m in self.members]
        return self._decoders[key]

    def open_session(self, src: Tensor, *, use_cache: bool, pack_weights: bool = True,
                     precision: str = "fp32") -> Session:
        """The session that decodes ``src`` (N, S) with every member: one member's own session
        when there is only one, else an :class:`EnsembleSession`."""
        if precision == "int8" and not use_cache:
            raise ValueError("int8 decoding runs with the key/value cache (use_cache=True)")
        if use_cache:
            sessions: list[Session] = []
            for member, decoder in zip(self.members, self.decoders(pack_weights=pack_weights, precision=precision),
                                       strict=True):
                sessions.append(decoder.start(src) if decoder is not None
                                else ReferenceSession(member, src, use_cache=True))  # type: ignore[arg-type]
        else:
            sessions = [ReferenceSession(m, src, use_cache=False) for m in self.members]  # type: ignore[arg-type]
        return sessions[0] if len(sessions) == 1 else EnsembleSession(sessions)


class EnsembleSession:
    """The members' sessions stepped together: :meth:`step` gives the mean of their log-softmaxes
    (R, V) float32, :meth:`select` follows the search's rows in every one."""

    def __init__(self, sessions: Sequence[Session]) -> None:
        needs = {s.needs_prefix for s in sessions}
        if len(needs) != 1:
            raise ValueError("ensemble members must all decode with the cache, or all without")
        self.sessions = list(sessions)
        self.needs_prefix = needs.pop()

    def step(self, tokens: Tensor) -> Tensor:
        """``tokens`` (R, 1), or (R, T) when ``needs_prefix`` -> mean log-probabilities (R, V)."""
        total: Tensor | None = None
        for session in self.sessions:
            log_probs = torch.log_softmax(session.step(tokens).float(), dim=-1)  # (R, V)
            total = log_probs if total is None else total.add_(log_probs)
        assert total is not None
        return total.div_(len(self.sessions))

    def select(self, index: Tensor, *, keep: Tensor | None, beams: int) -> None:
        for session in self.sessions:
            session.select(index, keep=keep, beams=beams)
