"""Requests per minute for one API key: a sliding window, exact at its edge.

    window = RateWindow(per_minute=60)
    window.take(now=time.monotonic())   # 0.0: let in; else the seconds until one more is

The window remembers when each of the last ``per_minute`` requests it let in came: a request is
let in when fewer than ``per_minute`` came in the 60 seconds before it, so no 60 seconds ever hold
more (a token bucket would let a full bucket through at the end of one minute and another at the
start of the next). Memory: ``per_minute`` times per key.
"""

from __future__ import annotations

from collections import deque

WINDOW_S = 60.0


class RateWindow:
    """At most ``per_minute`` requests in any 60 seconds."""

    def __init__(self, per_minute: int) -> None:
        if per_minute < 1:
            raise ValueError(f"per_minute must be positive, got {per_minute}")
        self.per_minute = per_minute
        self._times: deque[float] = deque()

    def take(self, *, now: float) -> float:
        """Let one request in at ``now`` (seconds, monotonic) and return 0.0, or return the
        seconds until one would be let in (and let none in)."""
        while self._times and self._times[0] <= now - WINDOW_S:
            self._times.popleft()
        if len(self._times) < self.per_minute:
            self._times.append(now)
            return 0.0
        return self._times[0] + WINDOW_S - now
