"""A burst for benchmarks/serve.py --burst: ``--burst-clients`` clients at once, each sending
``--burst-sentences`` Multi30k test sentences a request (beam ``--burst-beam``) and the next as soon
as its answer comes, a 503's ``Retry-After`` waited out first, for ``--burst-seconds``.

Before it, the same server under 32 closed-loop clients of one sentence a request (its own
throughput, and the warm-up after which the RSS is read). During the burst ``/health`` is asked
every 0.25 s and the RSS read every 0.5 s (benchmarks/serve_overload.py). Reported: answered
requests and sentences per second, shed (503), past the deadline (504), errors and requests left
unanswered, p50/p99/max of the answered requests' latency, /health, the RSS, and the issue's checks:
admitted p99 at most 2 s, none unanswered, RSS within 100 MB of its value after the warm-up,
/health answering throughout, answered sentences/s at least 0.8x the 32-client figure.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from serve_overload import (  # benchmarks/serve_overload.py
    TRANSPORT_ERRORS,
    Connection,
    _pct,
    _watch,
    closed_loop,
)

WARM_CLIENTS = 32


async def burst(url: str, pid: int, sentences: list[str], *, clients: int, per_request: int,
                beam: int, seconds: float) -> dict[str, Any]:
    """The burst's counts and latencies, and /health and the RSS meanwhile."""
    statuses: Counter[str] = Counter()
    latencies: list[float] = []
    answered_sentences = 0
    stop_at = time.perf_counter() + seconds
    watched: dict[str, Any] = {}

    async def client(k: int) -> None:
        nonlocal answered_sentences
        conn, i = Connection(url), k * per_request
        while time.perf_counter() < stop_at:
            texts = [sentences[(i + j) % len(sentences)] for j in range(per_request)]
            i += clients * per_request
            start = time.perf_counter()
            try:
                status, headers = await conn.post("/v1/translate", {"model": "m", "texts": texts, "beam": beam})
            except TRANSPORT_ERRORS:
                statuses["error"] += 1
                conn.close()
                continue
            end = time.perf_counter()
            statuses[str(status)] += 1
            if status == 200:
                latencies.append(end - start)
                answered_sentences += per_request if end <= stop_at else 0
            elif status == 503:
                await asyncio.sleep(min(float(headers.get("retry-after", 1)), max(0.0, stop_at - end)))
        conn.close()

    # every client is let finish its last request (that is what "none unanswered" checks)
    await asyncio.gather(_watch(url, pid, stop_at, watched), *(client(k) for k in range(clients)))
    sent = sum(v for k, v in statuses.items() if k != "error")
    return {"requests": sent, "statuses": dict(statuses), "answered": statuses["200"],
            "answered_sentences_per_s": answered_sentences / seconds,
            "shed": statuses["503"], "deadline": statuses["504"], "errors": statuses["error"],
            "p50_ms": _pct(latencies, 0.5), "p99_ms": _pct(latencies, 0.99),
            "max_ms": max(latencies, default=float("nan")) * 1000, **watched}


def burst_checks(steady_sentences_per_s: float, rss_after_warmup: float, found: dict[str, Any]) -> dict[str, bool]:
    return {"admitted p99 at most 2.0 s": found["p99_ms"] <= 2000,
            "none unanswered (no transport error)": found["errors"] == 0,
            "RSS within 100 MB of after warm-up": found["rss_mib_max"] <= rss_after_warmup + 100 * 1e6 / 2**20,
            "/health answered throughout": found["health_failures"] == 0,
            "answered sentences/s at least 0.8x 32 clients'":
                found["answered_sentences_per_s"] >= 0.8 * steady_sentences_per_s}


def run_burst(url: str, pid: int, sentences: list[str], args: Any) -> dict[str, Any]:
    from process_memory import kib  # benchmarks/process_memory.py

    asyncio.run(closed_loop(url, sentences, 4, 2.0))  # first calls allocate
    steady = asyncio.run(closed_loop(url, sentences, WARM_CLIENTS, args.seconds))  # requests of one sentence
    rss = kib(f"/proc/{pid}/status", "VmRSS:") / 1024
    print(f"{WARM_CLIENTS} clients, one sentence a request: {steady:.1f} sentences/s; RSS {rss:.0f} MiB",
          flush=True)
    found = asyncio.run(burst(url, pid, sentences, clients=args.burst_clients,
                              per_request=args.burst_sentences, beam=args.burst_beam,
                              seconds=args.burst_seconds))
    checks = burst_checks(steady, rss, found)
    print(f"burst {args.burst_clients} clients x {args.burst_sentences} sentences, beam {args.burst_beam}, "
          f"{args.burst_seconds:g} s: {found['answered']} answered ({found['answered_sentences_per_s']:.1f} "
          f"sentences/s), {found['shed']} shed, {found['deadline']} past the deadline, {found['errors']} errors; "
          f"p50 {found['p50_ms']:.0f} ms p99 {found['p99_ms']:.0f} ms max {found['max_ms']:.0f} ms; "
          f"/health worst {found['health_worst_ms']:.0f} ms ({found['health_failures']} failed); "
          f"RSS {rss:.0f} -> max {found['rss_mib_max']:.0f} MiB", flush=True)
    for what, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return {"steady_clients": WARM_CLIENTS, "steady_sentences_per_s": steady, "rss_mib_after_warmup": rss,
            "burst": found, "checks": checks}
