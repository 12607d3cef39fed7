"""What a batch costs the server, in seconds: a part per batch, a part per text (each text of a
request, and each request: one at least) and a part per source token, all three measured, so that
a queue of few long requests and one of many short ones are each judged by what they will take.

    cost = ServiceCost()
    cost.observe(texts=4, tokens=60, seconds=0.05)          # one batch's service time
    cost.seconds(batches=1, texts=8, tokens=96)             # what one more request would take

A text, not a request, is the unit: a request's texts are decoded as that many sentences, each
with its own search, so a cost learnt on requests of one sentence would make a request of eight
as cheap as one of one; what a request costs whatever its size (reading, checking, answering it)
is then counted in its texts, which errs on the side of refusing.

A batch's service time is the server's wall time for it, not the model call's alone: from when
the server could start on it (the previous batch's end, or its first request's arrival when the
server was idle) to its answers being handed back, so that what the event loop spends on every
request (reading, checking, answering, shedding) counts, on a machine where it shares the core
with the model. The three parts are a least-squares fit of the recent batches' times on (1, their
texts, their tokens), each batch weighted ``decay`` times the one after it (older ones fade),
with no part negative: of the fits of every subset of the parts whose coefficients are all
non-negative, the one that leaves the least error, a part more kept only where it leaves
``TIE`` less (on a busy machine the batches' times are noisy, and a part that fits the noise
would misprice what comes next). Where the batches seen cannot tell two parts apart, the fit
keeps the one earlier in (tokens, text, batch): tokens are what grows with the work (every text of
one size), and a text's part is the safer guess than a batch's (every batch of one request: a
lone client, or batching off).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

DECAY = 0.95  # weight of a batch against the one after it: about the last 20 batches count
PARTS = ("per_token_s", "per_text_s", "per_batch_s")  # in the order a tie keeps them
TIE = 0.1  # a fit with more parts is kept only when it leaves this much less error (relative)


@dataclass
class ServiceCost:
    """The fitted seconds per batch, per text and per source token (None each until a batch
    was timed; set all three to fix the cost, as tests do). ``decay``: the weight of each older
    batch."""

    per_batch_s: float | None = None
    per_text_s: float | None = None
    per_token_s: float | None = None
    decay: float = DECAY
    # the weighted sums of the fit: x x^T over x = (tokens, texts, 1), x s, and s^2
    _xx: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)), repr=False)
    _xs: np.ndarray = field(default_factory=lambda: np.zeros(3), repr=False)
    _ss: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {self.decay}")
        if self.per_batch_s is None and self.per_text_s is not None and self.per_token_s is not None:
            self.per_batch_s = 0.0  # two parts given: no cost a batch

    @property
    def known(self) -> bool:
        """Whether a cost is known (a batch was timed, or the parts were set)."""
        return None not in (self.per_batch_s, self.per_text_s, self.per_token_s)

    def seconds(self, *, batches: int = 1, texts: int, tokens: int) -> float | None:
        """Seconds ``texts`` texts of ``tokens`` source tokens in all, run as ``batches``
        batches, would take (None while the cost is unknown)."""
        if not self.known:
            return None
        return (batches * self.per_batch_s + texts * self.per_text_s  # type: ignore[operator]
                + tokens * self.per_token_s)

    def observe(self, *, texts: int, tokens: int, seconds: float) -> None:
        """Take in one batch of ``texts`` texts and ``tokens`` tokens that took ``seconds``."""
        if texts < 1 or tokens < 0 or not seconds >= 0:
            raise ValueError(f"a batch of {texts} texts, {tokens} tokens, {seconds} s")
        x = np.array([float(tokens), float(texts), 1.0])
        self._xx = self.decay * self._xx + np.outer(x, x)
        self._xs = self.decay * self._xs + x * seconds
        self._ss = self.decay * self._ss + seconds * seconds
        fitted = self._fit()
        self.per_token_s, self.per_text_s, self.per_batch_s = (float(v) for v in fitted)

    def _fit(self) -> np.ndarray:
        """The non-negative least-squares parts (tokens, text, batch): the subset fit with
        the least error, one tried earlier (fewer parts, earlier in PARTS) kept unless a later
        one leaves TIE less."""
        best, best_error = np.zeros(3), self._ss
        scale = max(self._ss, 1e-30)
        for size in (1, 2, 3):
            for subset in combinations(range(3), size):
                idx = list(subset)
                a, b = self._xx[np.ix_(idx, idx)], self._xs[idx]
                if np.linalg.cond(a) > 1e10:  # these parts cannot be told apart here
                    continue
                coef = np.linalg.solve(a, b)
                if (coef < 0).any():
                    continue
                error = self._ss - 2 * coef @ b + coef @ a @ coef
                if error < best_error * (1 - TIE) - 1e-12 * scale:
                    full = np.zeros(3)
                    full[idx] = coef
                    best, best_error = full, error
        return best
