"""What a batch costs the server, in seconds: a part per request and a part per source token,
both measured, so that a queue of few long requests and one of many short ones are each judged by
what they will take.

    cost = ServiceCost()
    cost.observe(requests=4, tokens=60, seconds=0.05)    # one batch's service time
    cost.seconds(requests=1, tokens=12)                  # what one more request would take

A batch's service time is the server's wall time for it, not the model call's alone: from when
the server could start on it (the previous batch's end, or its first request's arrival when the
server was idle) to its answers being handed back, so that what the event loop spends on every
request (reading, checking, answering, shedding) counts, on a machine where it shares the core
with the model. The two parts are a least-squares fit of the recent batches' times on their
requests and tokens, each batch weighted ``weight`` times the one before it (older ones fade);
neither part is ever negative. When the batches seen cannot tell the two apart (every request of
one size), the fit puts the cost on the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

DECAY = 0.85  # weight of a batch against the one after it: about the last 7 batches count


@dataclass
class ServiceCost:
    """The fitted seconds per request and per source token (None each until a batch was timed;
    set them to fix the cost, as tests do). ``decay``: the weight of each older batch."""

    per_request_s: float | None = None
    per_token_s: float | None = None
    decay: float = DECAY
    # the weighted sums of the fit: requests², requests·tokens, tokens², requests·s, tokens·s
    _rr: float = 0.0
    _rt: float = 0.0
    _tt: float = 0.0
    _rs: float = 0.0
    _ts: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {self.decay}")

    @property
    def known(self) -> bool:
        """Whether a cost is known (a batch was timed, or the parts were set)."""
        return self.per_request_s is not None and self.per_token_s is not None

    def seconds(self, *, requests: int, tokens: int) -> float | None:
        """Seconds ``requests`` requests of ``tokens`` source tokens in all would take (None
        while the cost is unknown)."""
        if not self.known:
            return None
        return requests * self.per_request_s + tokens * self.per_token_s  # type: ignore[operator]

    def observe(self, *, requests: int, tokens: int, seconds: float) -> None:
        """Take in one batch of ``requests`` requests and ``tokens`` tokens that took ``seconds``."""
        if requests < 1 or tokens < 0 or not seconds >= 0:
            raise ValueError(f"a batch of {requests} requests, {tokens} tokens, {seconds} s")
        d, r, t, s = self.decay, float(requests), float(tokens), float(seconds)
        self._rr = d * self._rr + r * r
        self._rt = d * self._rt + r * t
        self._tt = d * self._tt + t * t
        self._rs = d * self._rs + r * s
        self._ts = d * self._ts + t * s
        self.per_request_s, self.per_token_s = self._fit()

    def _fit(self) -> tuple[float, float]:
        """The non-negative least-squares parts: both when the batches tell them apart, else the
        better of one part alone (tokens when they tie)."""
        det = self._rr * self._tt - self._rt * self._rt
        # collinear within rounding: every batch had the same tokens per request
        if det > 1e-9 * self._rr * self._tt:
            a = (self._tt * self._rs - self._rt * self._ts) / det
            b = (self._rr * self._ts - self._rt * self._rs) / det
            if a >= 0 and b >= 0:
                return a, b
        tokens_only = self._ts / self._tt if self._tt > 0 else None
        requests_only = self._rs / self._rr
        if tokens_only is None:
            return max(requests_only, 0.0), 0.0
        # the residual of each one-part fit: sum s² - (sum x·s)² / sum x² (the s² term is shared)
        if self._rs * self._rs / self._rr > self._ts * self._ts / self._tt * (1 + 1e-9):
            return max(requests_only, 0.0), 0.0
        return 0.0, max(tokens_only, 0.0)
