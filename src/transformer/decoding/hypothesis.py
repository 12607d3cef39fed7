"""What a search returns when asked for scores: :class:`Hypothesis`."""

from __future__ import annotations

from dataclasses import dataclass


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
