"""Target prefixes: the first tokens of each translation given, not decoded (Hugging Face's
``decoder_input_ids``, CTranslate2's ``target_prefix``), row by row in one batch.

Shapes: B sentences, R rows being decoded, N sentences still searching, K beams, P the longest
prefix, V target vocabulary.

A prefix is forced one step at a time through the same loop that decodes the rest: while a row is
within its prefix, its next token is the prefix's, whatever the model prefers. So rows with
prefixes of different lengths (or none) share one batch, the cache and the fast path are used as
for any token, and the model's log-probabilities of forced tokens never enter a score: a score is
that of the continuation, given the source and the prefix (Hugging Face's beam scores likewise
count only the tokens generated after ``decoder_input_ids``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.decoding.guards import guarded
from transformer.decoding.sampling import Sampler


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
    ``repetition_penalty``: :mod:`transformer.decoding.guards`; ``sampler`` with ``uniforms``
    (B * K, L) and ``samples`` K: draw tokens instead of taking the best
    (:mod:`transformer.decoding.sampling`; greedy decoding's loop only); ``log_probs``: keep the
    model's log-probability of each output (costs a log-sum-exp a step in greedy decoding)."""

    prefix: TargetPrefix | None = None
    no_repeat_ngram: int = 0
    repetition_penalty: float = 1.0
    sampler: Sampler | None = None
    uniforms: Tensor | None = None
    samples: int = 1
    log_probs: bool = False

    @property
    def guards(self) -> bool:
        """Whether a repetition guard is on."""
        return self.no_repeat_ngram > 0 or self.repetition_penalty != 1.0

    def guard(self, scores: Tensor, history: Tensor) -> Tensor:
        """``scores`` (R, V) after the repetition guards, given each row's ``history`` (R, T)."""
        return guarded(scores, history, no_repeat_ngram=self.no_repeat_ngram,
                       repetition_penalty=self.repetition_penalty)


def check_guards(*, no_repeat_ngram: int, repetition_penalty: float) -> None:
    """ValueError naming a guard out of range (``no_repeat_ngram`` >= 0, ``repetition_penalty`` > 0)."""
    if isinstance(no_repeat_ngram, bool) or not isinstance(no_repeat_ngram, int) or no_repeat_ngram < 0:
        raise ValueError(f"no_repeat_ngram must be a non-negative integer, got {no_repeat_ngram!r}")
    if not math.isfinite(repetition_penalty) or repetition_penalty <= 0:
        raise ValueError(f"repetition_penalty must be a positive number, got {repetition_penalty!r}")
