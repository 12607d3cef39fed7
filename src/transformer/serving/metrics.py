"""The server's counters in Prometheus' text format (exposition format 0.0.4), kept by hand: requests
by path and status, a latency histogram, batch sizes and tokens, requests shed (queue full,
deadline) and rate-limited, reloads, and each model's queue now.

Everything is updated on the event loop's thread (the batcher reports batches there), so no lock.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)  # seconds
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # requests per batch
KNOWN_PATHS = frozenset({"/", "/health", "/metrics", "/v1/models", "/v1/translate",
                         "/v1/attention", "/v1/classify", "/openapi.json", "/docs",
                         "/v1/admin/reload", "/translate", "/detect", "/languages"})


class Histogram:
    """A cumulative histogram: counts per upper bound, their sum and total count."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        sep = "," if labels else ""
        out, running = [], 0
        for bound, n in zip([*map(_num, self.bounds), "+Inf"], self.counts, strict=True):
            running += n
            out.append(f'{name}_bucket{{{labels}{sep}le="{bound}"}} {running}')
        tail = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{tail} {_num(self.sum)}", f"{name}_count{tail} {self.count}"]
        return out


def _label(value: str) -> str:
    """``value`` as a label value of the text format (backslash, quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Metrics:
    """What ``GET /metrics`` reports."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str, int]] = Counter()  # (method, path, status)
        self.latency: dict[str, Histogram] = {}
        self.batch_size: dict[str, Histogram] = {}
        self.batch_tokens: Counter[str] = Counter()
        self.sentences: Counter[str] = Counter()
        self.shed: Counter[tuple[str, str]] = Counter()  # (model, "queue_full" or "deadline")
        self.rate_limited: Counter[str] = Counter()  # by the key's name (never the key)
        self.reloads: Counter[tuple[str, str]] = Counter()  # (model, "loaded" or "failed")
        self.in_flight = 0  # requests let in and not answered yet
        self.unanswered = 0  # requests cancelled before their answer went out

    def request(self, method: str, path: str, status: int, seconds: float) -> None:
        path = path if path in KNOWN_PATHS else "other"  # unknown paths must not grow the table
        self.requests[(method, path, status)] += 1
        self.latency.setdefault(path, Histogram(LATENCY_BUCKETS)).observe(seconds)

    def batch(self, model: str, size: int, tokens: int, sentences: int) -> None:
        self.batch_size.setdefault(model, Histogram(BATCH_BUCKETS)).observe(size)
        self.batch_tokens[model] += tokens
        self.sentences[model] += sentences

    def render(self, queues: Mapping[str, tuple[int, int]] | None = None) -> str:
        """The text ``GET /metrics`` answers; ``queues``: each model's (requests, source tokens)
        waiting now."""
        lines = ["# HELP transformer_requests_total HTTP requests by method, path and status.",
                 "# TYPE transformer_requests_total counter"]
        for (method, path, status), n in sorted(self.requests.items()):
            lines.append(f'transformer_requests_total{{method="{method}",path="{path}",status="{status}"}} {n}')
        lines += ["# HELP transformer_request_seconds Time from request to response.",
                  "# TYPE transformer_request_seconds histogram"]
        for path, hist in sorted(self.latency.items()):
            lines += hist.lines("transformer_request_seconds", f'path="{path}"')
        lines += ["# HELP transformer_batch_requests Requests gathered into one model call.",
                  "# TYPE transformer_batch_requests histogram"]
        for model, hist in sorted(self.batch_size.items()):
            lines += hist.lines("transformer_batch_requests", f'model="{model}"')
        lines += ["# HELP transformer_source_tokens_total Source tokens run through each model.",
                  "# TYPE transformer_source_tokens_total counter"]
        lines += [f'transformer_source_tokens_total{{model="{m}"}} {n}' for m, n in sorted(self.batch_tokens.items())]
        lines += ["# HELP transformer_texts_total Texts translated or classified by each model.",
                  "# TYPE transformer_texts_total counter"]
        lines += [f'transformer_texts_total{{model="{m}"}} {n}' for m, n in sorted(self.sentences.items())]
        return "\n".join(lines + self._operation_lines(queues or {})) + "\n"

    def _operation_lines(self, queues: Mapping[str, tuple[int, int]]) -> list[str]:
        lines = ["# HELP transformer_requests_in_flight Requests let in and not answered yet.",
                 "# TYPE transformer_requests_in_flight gauge",
                 f"transformer_requests_in_flight {self.in_flight}",
                 "# HELP transformer_requests_unanswered_total Requests cancelled before their "
                 "answer (a drain that ran out of time).",
                 "# TYPE transformer_requests_unanswered_total counter",
                 f"transformer_requests_unanswered_total {self.unanswered}"]
        lines += ["# HELP transformer_shed_total Requests refused for a full queue (503) or that "
                 "waited out their deadline in it (504), per model.",
                 "# TYPE transformer_shed_total counter"]
        lines += [f'transformer_shed_total{{model="{m}",reason="{r}"}} {n}'
                  for (m, r), n in sorted(self.shed.items())]
        lines += ["# HELP transformer_rate_limited_total Requests refused (429) for their key's "
                  "requests per minute, by the key's name.",
                  "# TYPE transformer_rate_limited_total counter"]
        lines += [f'transformer_rate_limited_total{{key="{_label(k)}"}} {n}'
                  for k, n in sorted(self.rate_limited.items())]
        lines += ["# HELP transformer_reloads_total Model directories reloaded, or that failed to load.",
                  "# TYPE transformer_reloads_total counter"]
        lines += [f'transformer_reloads_total{{model="{m}",result="{r}"}} {n}'
                  for (m, r), n in sorted(self.reloads.items())]
        lines += ["# HELP transformer_queue_requests Requests waiting in each model's queue.",
                  "# TYPE transformer_queue_requests gauge"]
        lines += [f'transformer_queue_requests{{model="{m}"}} {q[0]}' for m, q in sorted(queues.items())]
        lines += ["# HELP transformer_queue_tokens Source tokens waiting in each model's queue.",
                  "# TYPE transformer_queue_tokens gauge"]
        lines += [f'transformer_queue_tokens{{model="{m}"}} {q[1]}' for m, q in sorted(queues.items())]
        return lines
