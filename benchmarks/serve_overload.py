"""``benchmarks/serve.py --overload``: one server pushed past what it can do, on loopback.

1. The sustainable rate: ``--sustain-clients`` clients, each sending its next request when its
   last is answered, for ``--seconds``: answered requests per second, R.
2. Normal load: requests sent at R (open loop: on a schedule, whatever the answers do) for
   ``--normal-seconds``; the server's RSS at its end is the reference.
3. Overload: requests sent at ``--overload-factor`` x R for ``--overload-seconds`` by a bounded
   client (at most ``--overload-clients`` in flight; a request whose turn comes with none free
   waits for one, and the client counts how late it went out).

Every request is one Multi30k test sentence (beam 4, the API's default). While a phase runs,
``/health`` is asked every 0.25 s (2 s timeout) and the server's RSS (VmRSS) read every 0.5 s.
Reported per phase: requests sent and answered per second, status counts (503: shed, 504: past the
deadline), transport errors and requests unanswered, p50/p99 of answered requests, /health's
worst time and failures, the server's RSS. Then the issue's checks: no status but 200, 503 and
504; p99 of answered requests at most 2 s; RSS at the end of the overload within 20% of the
normal load's; /health answered throughout; every request answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from process_memory import kib  # benchmarks/process_memory.py

HEALTH_EVERY_S = 0.25
# a connection idle this long is opened anew: under uvicorn's 5 s keep-alive, so a request never
# goes out on a connection the server is closing (an error that no server could answer)
KEEPALIVE_S = 2.0
RSS_EVERY_S = 0.5


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _gauge(metrics: str, name: str) -> float:
    found = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", metrics, re.M)
    return float(found[1]) if found else float("nan")


async def _watch(url: str, pid: int, until: float, out: dict[str, Any]) -> None:
    """/health's times and failures, the server's RSS (MiB), and its requests in flight and
    queued (where a request waits: in the model's queue, or before it), until ``until``."""
    health: list[float] = []
    failures = 0
    rss: list[float] = []
    gauges: list[tuple[float, float, float]] = []
    next_rss = 0.0
    async with httpx.AsyncClient(base_url=url, timeout=2.0) as http:
        while time.perf_counter() < until:
            start = time.perf_counter()
            try:
                ok = (await http.get("/health")).status_code == 200
            except httpx.HTTPError:
                ok = False
            health.append(time.perf_counter() - start)
            failures += not ok
            if start >= next_rss:
                rss.append(kib(f"/proc/{pid}/status", "VmRSS:") / 1024)
                next_rss = start + RSS_EVERY_S
                with contextlib.suppress(httpx.HTTPError):
                    text = (await http.get("/metrics")).text
                    gauges.append((_gauge(text, "transformer_requests_in_flight"),
                                   _gauge(text, "transformer_queue_requests"),
                                   _gauge(text, "transformer_queue_tokens")))
            await asyncio.sleep(max(0.0, HEALTH_EVERY_S - (time.perf_counter() - start)))
    out.update(health_checks=len(health), health_failures=failures,
               health_worst_ms=max(health, default=float("nan")) * 1000,
               rss_mib_max=max(rss, default=float("nan")), rss_mib_end=rss[-1] if rss else float("nan"),
               in_flight_max=max((g[0] for g in gauges), default=float("nan")),
               queued_max=max((g[1] for g in gauges), default=float("nan")),
               queued_tokens_max=max((g[2] for g in gauges), default=float("nan")))


# what a Connection's request may fail with: the clients count it and open a fresh connection
TRANSPORT_ERRORS = (ConnectionError, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError)


class Connection:
    """One keep-alive HTTP/1.1 connection, one request at a time: a client far lighter than
    httpx's pool (whose own queueing, on a shared core, added seconds the server never saw), so
    the latencies are the server's. A connection idle for ``KEEPALIVE_S`` is opened anew."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used = 0.0

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def post(self, path: str, body: dict, *, timeout: float = 120.0) -> tuple[int, dict[str, str]]:
        """(status, headers) of one POST of ``body`` as JSON; ConnectionError when the server
        closes the connection without an answer, TimeoutError after ``timeout`` seconds."""
        if self.writer is None or time.perf_counter() - self.used > KEEPALIVE_S:
            self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode()
        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        await self.writer.drain()
        line = await asyncio.wait_for(self.reader.readline(), timeout)
        if not line:
            self.close()
            raise ConnectionError("closed without an answer")
        headers = {}
        while (header := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = header.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        await self.reader.readexactly(int(headers.get("content-length", 0)))
        self.used = time.perf_counter()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return int(line.split()[1]), headers


def _body(sentences: list[str], i: int) -> dict:
    return {"model": "m", "texts": [sentences[i % len(sentences)]]}


async def closed_loop(url: str, sentences: list[str], clients: int, seconds: float) -> float:
    """Requests answered (200) per second by ``clients`` that each send on their last answer
    (and wait out a 503's Retry-After, as a client should)."""
    answered = 0
    stop_at = time.perf_counter() + seconds

    async def client(k: int) -> None:
        nonlocal answered
        conn, i = Connection(url), k
        while time.perf_counter() < stop_at:
            status, headers = await conn.post("/v1/translate", _body(sentences, i))
            i += clients
            if status == 200 and time.perf_counter() <= stop_at:
                answered += 1
            elif status == 503:
                await asyncio.sleep(float(headers.get("retry-after", 1)))
        conn.close()

    await asyncio.gather(*(client(k) for k in range(clients)))
    return answered / seconds


async def open_loop(url: str, pid: int, sentences: list[str], *, rate: float, seconds: float,
                    clients: int) -> dict[str, Any]:
    """Requests due at ``rate`` a second for ``seconds``, sent by ``clients`` connections (a
    request due while all are busy waits for one: how late it went out is counted), each awaited
    to its answer; what came back, and /health, the RSS and the server's CPU meanwhile."""
    statuses: Counter[str] = Counter()
    latencies: list[float] = []
    sent_at: list[float] = []  # of each answered request, seconds into the phase
    late: list[float] = []
    due: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()
    watched: dict[str, Any] = {}
    start = last_sent = time.perf_counter()
    cpu_start = cpu_seconds(pid)
    total = int(rate * seconds)

    async def client() -> None:
        nonlocal last_sent
        conn = Connection(url)
        while (item := await due.get()) is not None:
            i, due_at = item
            sent = last_sent = time.perf_counter()
            late.append(sent - due_at)
            try:
                status, _ = await conn.post("/v1/translate", _body(sentences, i))
            except (asyncio.TimeoutError, TimeoutError):
                statuses["unanswered"] += 1
                conn.close()
                continue
            except OSError as err:
                statuses[f"transport error: {type(err).__name__}"] += 1
                conn.close()
                continue
            statuses[str(status)] += 1
            if status == 200:
                latencies.append(time.perf_counter() - sent)
                sent_at.append(sent - start)
        conn.close()

    watcher = asyncio.ensure_future(_watch(url, pid, start + seconds, watched))
    workers = [asyncio.ensure_future(client()) for _ in range(clients)]
    for i in range(total):
        await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
        due.put_nowait((i, start + i / rate))
    for _ in workers:
        due.put_nowait(None)
    await asyncio.gather(*workers)
    await watcher
    took = time.perf_counter() - start
    cpu = cpu_seconds(pid) - cpu_start
    return {"server_cpu_s": cpu, "server_core_share": cpu / took,
            "answered_per_server_cpu_s": statuses["200"] / cpu if cpu else float("nan"),
            "rate_asked": rate, "seconds": seconds, "sent": total,
            "sent_per_s": total / max(seconds, last_sent - start),
            "answered_per_s": statuses["200"] / took, "statuses": dict(statuses),
            "shed_503": statuses["503"], "deadline_504": statuses["504"],
            "p50_ms": _pct(latencies, 0.5), "p99_ms": _pct(latencies, 0.99),
            "latest_send_ms": max(late, default=0.0) * 1000,
            "slowest": sorted(([round(t, 2), round(lat * 1000)] for t, lat in zip(sent_at, latencies, strict=True)),
                              key=lambda pair: -pair[1])[:10], **watched}


def checks(normal: dict[str, Any], over: dict[str, Any]) -> dict[str, bool]:
    """The issue's conditions on the overload phase (and the normal phase's RSS)."""
    return {"only 200, 503, 504": set(over["statuses"]) <= {"200", "503", "504"},
            "p99 of answered <= 2 s": over["p99_ms"] <= 2000,
            "RSS at the end within 20% of normal load's": over["rss_mib_end"] <= 1.2 * normal["rss_mib_end"],
            "/health answered throughout": over["health_failures"] == 0,
            "no request unanswered": all(k.isdigit() for k in over["statuses"])}


def run_overload(url: str, pid: int, sentences: list[str], args: Any) -> dict[str, Any]:
    """The three phases and the checks; prints as it goes."""
    asyncio.run(closed_loop(url, sentences, 4, 2.0))  # warm up: first calls allocate
    rate = asyncio.run(closed_loop(url, sentences, args.sustain_clients, args.seconds))
    print(f"sustainable: {rate:.1f} requests/s ({args.sustain_clients} clients, {args.seconds:g} s)", flush=True)
    phases = {}
    for name, factor, seconds in (("normal", 1.0, args.normal_seconds),
                                  ("overload", args.overload_factor, args.overload_seconds)):
        phases[name] = asyncio.run(open_loop(url, pid, sentences, rate=factor * rate, seconds=seconds,
                                             clients=args.overload_clients))
        p = phases[name]
        print(f"{name:8s} x{factor:g}: sent {p['sent_per_s']:.1f}/s, answered {p['answered_per_s']:.1f}/s "
              f"({p['answered_per_server_cpu_s']:.1f} per CPU second of the server, which had "
              f"{p['server_core_share']:.0%} of a core), "
              f"statuses {p['statuses']}, p50 {p['p50_ms']:.0f} ms, p99 {p['p99_ms']:.0f} ms, "
              f"/health worst {p['health_worst_ms']:.0f} ms ({p['health_failures']} failed), "
              f"in flight at most {p['in_flight_max']:.0f}, queued {p['queued_max']:.0f}, "
              f"RSS end {p['rss_mib_end']:.0f} MiB (max {p['rss_mib_max']:.0f})", flush=True)
    verdict = checks(phases["normal"], phases["overload"])
    for name, ok in verdict.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    return {"sustainable_per_s": rate, "sustain_clients": args.sustain_clients, **phases,
            "checks": verdict}
