"""The plan of one search: the options of a call (:class:`~transformer.config.decoding.DecodeOptions`)
turned once per batch into each sentence's length limit and one :class:`Steering` value
(:func:`plan`, the prologue greedy decoding, sampling and beam search share). Steering is what
guides a search besides the model: target prefixes, repetition guards, forbidden phrases, a least
length, sampling's cut and streams.

Shapes: B sentences, R rows being decoded, N sentences still searching, K beams, P the longest
prefix, V target vocabulary.

Target prefixes are the first tokens of each translation given, not decoded (Hugging Face's
``decoder_input_ids``, CTranslate2's ``target_prefix``), row by row in one batch. A prefix is
forced one step at a time through the same loop that decodes the rest: while a row is within its
prefix, its next token is the prefix's, whatever the model prefers. So rows with prefixes of
different lengths (or none) share one batch, the cache and the fast path are used as for any
token, and the model's log-probabilities of forced tokens never enter a score: a score is that of
the continuation, given the source and the prefix (Hugging Face's beam scores likewise count only
the tokens generated after ``decoder_input_ids``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from transformer.config.decoding import DecodeOptions, OptionError, check_for_model  # noqa: F401 - its home was here
from transformer.decoding.bounds import check_source, output_limits
from transformer.decoding.guards import ban_sequences, guarded
from transformer.decoding.ranking import vocabulary_chunk
from transformer.decoding.sampling import Sampler, uniform_streams


@dataclass(frozen=True)
class TargetPrefix:
    """Each sentence's forced first tokens: ``tokens`` (B, P) long (anything after a row's
    prefix is never read) and ``lengths`` (B,) long (0: no prefix)."""

    tokens: Tensor
    lengths: Tensor

    @classmethod
    def of(cls, prefixes: Sequence[Sequence[int]] | None, *, rows: int, pad_id: int,
           device: torch.device | str) -> TargetPrefix | None:
        """From one id list per sentence (``rows`` of them); None when there is none or every
        one is empty (then nothing is forced and the search runs as without). ValueError for a
        count that is not ``rows`` or an id that is ``pad_id``."""
        if prefixes is None:
            return None
        if len(prefixes) != rows:
            raise ValueError(f"prefixes: {len(prefixes)} given for {rows} sentences")
        lengths = [len(p) for p in prefixes]
        if max(lengths, default=0) == 0:
            return None
        tokens = torch.full((rows, max(lengths)), pad_id, dtype=torch.long)
        for i, ids in enumerate(prefixes):
            if pad_id in ids:
                raise ValueError(f"prefixes[{i}] holds the pad id {pad_id}, which is never a word")
            tokens[i, : len(ids)] = torch.as_tensor(list(ids), dtype=torch.long)
        return cls(tokens.to(device), torch.tensor(lengths, dtype=torch.long, device=device))

    @property
    def longest(self) -> int:
        """P: after this many steps nothing is forced any more."""
        return self.tokens.size(1)

    def limits(self, limits: Tensor, *, model_max_len: int) -> Tensor:
        """Each sentence's most tokens (B,), raised where needed to hold its prefix and at least
        one decoded token (EOS, at the least). ValueError when a prefix leaves no room in the
        model's ``model_max_len`` positions."""
        longest = int(self.lengths.max())
        if longest + 1 > model_max_len:
            raise ValueError(f"a target prefix of {longest} tokens leaves no room to decode: the "
                             f"model has {model_max_len} target positions")
        return torch.maximum(limits, self.lengths + 1)

    def force(self, ids: Tensor, sentences: Tensor, step: int) -> tuple[Tensor, Tensor]:
        """``ids`` (R,) chosen at ``step`` by the rows of ``sentences`` (R,), with each row still
        within its prefix given the prefix's token; and which rows were forced (R,) bool."""
        forced = self.lengths[sentences] > step  # (R,)
        return torch.where(forced, self.tokens[sentences, step], ids), forced

    def force_beams(self, log_probs: Tensor, sentences: Tensor, step: int) -> Tensor:
        """Next-token log-probabilities (N, K, V) of the beams of ``sentences`` (N,), with every
        beam of a sentence still within its prefix given 0 for the prefix's token and -inf for
        any other (a forced token adds nothing to a score). A new tensor."""
        n, k, v = log_probs.shape
        forced = self.lengths[sentences] > step  # (N,)
        only = torch.full((n, 1, v), -math.inf, device=log_probs.device, dtype=log_probs.dtype)
        only.scatter_(2, self.tokens[sentences, step].view(n, 1, 1), 0.0)  # (N, 1, V)
        return torch.where(forced[:, None, None], only, log_probs)


@dataclass(frozen=True)
class Steering:
    """What steers a search besides the model and the length limits (the defaults: nothing, the
    plain search). ``prefix``: forced first tokens; ``no_repeat_ngram`` and
    ``repetition_penalty``: :mod:`transformer.decoding.guards`; ``forbid``: token sequences no
    output may contain (:func:`~transformer.decoding.guards.ban_sequences`); ``min_len``: no EOS
    before this many tokens (a prefix's counting); ``sampler`` with ``uniforms`` (B * K, L) and
    ``samples`` K: draw tokens instead of taking the best (:mod:`transformer.decoding.sampling`;
    greedy decoding's loop only); ``log_probs``: keep the model's log-probability of each output
    (costs a log-sum-exp a step in greedy decoding)."""

    prefix: TargetPrefix | None = None
    no_repeat_ngram: int = 0
    repetition_penalty: float = 1.0
    forbid: tuple[tuple[int, ...], ...] = ()
    min_len: int = 0
    sampler: Sampler | None = None
    uniforms: Tensor | None = None
    samples: int = 1
    log_probs: bool = False

    @property
    def guards(self) -> bool:
        """Whether a repetition guard or a forbidden sequence is on."""
        return self.no_repeat_ngram > 0 or self.repetition_penalty != 1.0 or bool(self.forbid)

    def guard(self, scores: Tensor, history: Tensor) -> Tensor:
        """``scores`` (R, V) after the repetition guards and the forbidden sequences, given each
        row's ``history`` (R, T)."""
        scores = guarded(scores, history, no_repeat_ngram=self.no_repeat_ngram,
                         repetition_penalty=self.repetition_penalty)
        return ban_sequences(scores, history, self.forbid)


# the kernels' own short names of some option fields (greedy_decode(..., min_len=3, top_k=10))
KERNEL_NAMES: Mapping[str, str] = {"min_len": "min_length", "top_k": "sampling_topk",
                                   "top_p": "sampling_topp", "samples": "nbest"}


def options_of(options: DecodeOptions | None, base: Mapping[str, Any], fields: Mapping[str, Any]) -> DecodeOptions:
    """The options of a direct call of a search: ``options`` (None: ``base``, a search's own
    defaults, over DecodeOptions') with ``fields`` (DecodeOptions fields, or their
    :data:`KERNEL_NAMES`) replaced. OptionError (a ValueError) naming a bad field; TypeError for
    a name that is no field."""
    changes = {KERNEL_NAMES.get(name, name): value for name, value in fields.items()}
    known = {f.name for f in dataclasses.fields(DecodeOptions)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise TypeError(f"unexpected decoding option {unknown[0]!r} (known: {', '.join(sorted(known))})")
    if options is None:
        return DecodeOptions(**{**base, **changes})
    return dataclasses.replace(options, **changes) if changes else options


def plan(model: Any, src: Tensor, options: DecodeOptions, *,
         prefixes: Sequence[Sequence[int]] | None = None,
         forbid: Sequence[Sequence[int]] | None = None, keys: Sequence[object] | None = None,
         seed: int | None = None, log_probs: bool = False) -> tuple[Tensor, Steering]:
    """The prologue every search shares: each sentence's length limit (B,) and the
    :class:`Steering` of ``src`` (B, S) under ``options`` (already checked, by DecodeOptions) and
    this batch's own values: ``prefixes`` (target ids per sentence), ``forbid`` (token sequences,
    as the target tokenizer encodes ``options.forbid``), and, when sampling, ``keys`` (each
    sentence's random stream; default its place) and ``seed``. A limit is at most ``max_len``
    (and the model's positions), ``floor(max_len_a * source tokens + max_len_b)`` rounded up to
    a multiple of 16 with ``max_len_a``, raised to hold a sentence's prefix and one more token,
    and ``min_length`` and one more. ValueError for what only the model or the batch can refuse."""
    check_source(src)
    config, rows = model.config, src.size(0)
    limits = output_limits(src, pad_id=config.pad_id, max_len=options.max_len,
                           max_len_a=options.max_len_a, max_len_b=options.max_len_b,
                           model_max_len=config.max_len)  # (B,)
    prefix = TargetPrefix.of(prefixes, rows=rows, pad_id=config.pad_id, device=src.device)
    if prefix is not None:
        limits = prefix.limits(limits, model_max_len=config.max_len)
    if options.min_length:
        check_for_model(options, model_max_len=config.max_len)
        cap = config.max_len if options.max_len is None else min(options.max_len, config.max_len)
        limits = limits.clamp(min=min(options.min_length + 1, cap))
    sequences = tuple(tuple(ids) for ids in forbid or ())
    if any(not ids for ids in sequences):
        raise ValueError("forbid: a forbidden sequence is empty")
    steering = Steering(prefix=prefix, no_repeat_ngram=options.no_repeat_ngram,
                        repetition_penalty=options.repetition_penalty, forbid=sequences,
                        min_len=options.min_length, log_probs=log_probs)
    if not options.sampling:
        return limits, steering
    if seed is None:
        raise ValueError("sampling needs a seed")
    keys = list(range(rows)) if keys is None else list(keys)
    if len(keys) != rows:
        raise ValueError(f"keys: {len(keys)} given for {rows} sentences")
    samples = options.nbest or 1
    sampler = Sampler(temperature=float(options.temperature), top_k=options.sampling_topk,
                      top_p=float(options.sampling_topp), chunk=vocabulary_chunk(config.tgt_vocab_size))
    uniforms = uniform_streams(keys, seed=seed, samples=samples, steps=limits.tolist(), device=src.device)
    return limits, dataclasses.replace(steering, sampler=sampler, uniforms=uniforms, samples=samples,
                                       log_probs=True)
