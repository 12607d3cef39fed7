"""Serving benchmark: `transformer serve` under 1, 8, 32 and 64 concurrent clients on loopback.

Two servers of one model directory run side by side, dynamic batching on and off
(``--no-batching``), each pinned to one core with one thread (``taskset``), the clients on the
other core. For every client count the two are loaded in turn (on, off, off, on, ... for
``--rounds``), each for ``--seconds``: every client (a raw keep-alive connection: 32 httpx clients
got 0.7x the rate from the same server, their core a third busy) sends one Multi30k test sentence per request (beam 4, the API's
default) and sends the next as soon as its answer comes, a 503's ``Retry-After`` waited out
first. Reported: sentences/s (answers completed within the window), p50 and p99 latency,
errors and requests shed, the ratio on/off, and the ratio to the same model's offline
``translate -i`` (beam 4, the servers' core and ``--engine``, the fastest of 3 runs).
``--serve-flag=--engine=torch`` compares the servers on our engine.

While ``--bad-at`` clients load a server, one more client sends every kind of bad request (bad
JSON, wrong types, unknown model, empty list, too many texts, over-long text, oversized body,
non-UTF-8) over and over and checks each gets its 4xx with a one-line JSON error.

    .venv/bin/python benchmarks/serve.py --model runs/quality/en-de   # -> results/serve.json

``--overload`` runs one batching server past what it can do instead (benchmarks/serve_overload.py):
its sustainable request rate, then that rate for ``--normal-seconds``, then ``--overload-factor``
times it for ``--overload-seconds`` from a bounded client; answered/s, shed (503) and past the
deadline (504), p50/p99 of answered requests, /health and the server's RSS, and the issue's checks.

    .venv/bin/python benchmarks/serve.py --model runs/quality/en-de --overload  # -> results/serve-overload.json

``--burst`` runs one batching server under a burst instead (benchmarks/serve_burst.py): its own
throughput at 32 clients first, then ``--burst-clients`` clients at once, ``--burst-sentences``
sentences a request, beam ``--burst-beam``, for ``--burst-seconds``, each waiting out a 503's
Retry-After; answered sentences/s, shed, p50/p99/max of the answered, /health, the RSS, and the
issue's checks. The clients (this process) run on ``--client-core``, the server on ``--server-core``.

    .venv/bin/python benchmarks/serve.py --model runs/quality/en-de --burst  # -> results/serve-burst.json

Only 127.0.0.1 is used. The machine may be shared: quote the on/off ratios, not raw figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from machine import describe, require_model  # benchmarks/machine.py
from serve_burst import run_burst  # benchmarks/serve_burst.py
from serve_overload import (  # benchmarks/serve_overload.py
    TRANSPORT_ERRORS,
    Connection,
    run_overload,
)

RESULTS = Path(__file__).resolve().parent / "results" / "serve.json"
OVERLOAD_RESULTS = RESULTS.with_name("serve-overload.json")
BURST_RESULTS = RESULTS.with_name("serve-burst.json")
DATA = Path(os.environ.get("TRANSFORMER_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, *, batching: bool, core: str | None, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "transformer", "serve", "--model", f"m={model}", "--host", "127.0.0.1",
           "--port", str(port), "--threads", "1", *extra, *([] if batching else ["--no-batching"])]
    if core is not None:
        cmd = ["taskset", "-c", core, *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"the server on port {port} did not start")


def offline_rate(model: str, sentences: list[str], *, core: str | None, extra: list[str],
                 lines: int = 2000, repeats: int = 3) -> float:
    """Sentences/s of ``transformer translate -i`` on ``lines`` test sentences (the set repeated),
    beam 4 as the clients ask, one thread on the servers' core, start-up included, the fastest
    of ``repeats`` runs (one run swings by 20% on a shared machine): what the served rate is
    compared with. The servers' ``--engine`` is the command's."""
    engine = next((flag.split("=", 1)[1] if "=" in flag else extra[i + 1]
                   for i, flag in enumerate(extra) if flag.startswith("--engine")), "auto")
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / "source.txt"
        source.write_text("\n".join((sentences * (lines // len(sentences) + 1))[:lines]) + "\n", encoding="utf-8")
        cmd = [sys.executable, "-m", "transformer", "translate", "--model", model, "-i", str(source),
               "-o", str(Path(work) / "out.txt"), "--threads", "1", "--beam", "4", "--engine", engine,
               "--no-progress"]
        cmd = ["taskset", "-c", core, *cmd] if core is not None else cmd
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm: conversion, bytecode
        fastest = float("inf")
        for _ in range(repeats):
            began = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            fastest = min(fastest, time.perf_counter() - began)
        return lines / fastest


def bad_requests() -> list[tuple[bytes, int]]:
    good = {"model": "m", "texts": ["A dog runs."]}
    cases = [
        (b'{"model": "m", "texts": [', 400),
        (b'\xff\xfe{"model": "m"}', 400),
        (json.dumps({**good, "beam": "4"}).encode(), 422),
        (json.dumps({**good, "model": "nope"}).encode(), 404),
        (json.dumps({**good, "texts": []}).encode(), 422),
        (json.dumps({**good, "texts": ["a"] * 65}).encode(), 422),
        (json.dumps({**good, "texts": ["a" * 1001]}).encode(), 422),
        (json.dumps({**good, "texts": ["a dog"] * 64, "pad": "x" * (1 << 20)}).encode(), 413),
    ]
    return cases


async def load(url: str, sentences: list[str], clients: int, seconds: float, *, bad: bool) -> dict:
    latencies: list[float] = []
    errors = shed = 0
    bad_ok = bad_total = 0
    bad_wrong: list[str] = []
    stop_at = time.perf_counter() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:  # the bad-input client's

        async def client(k: int) -> None:
            # the overload mode's raw keep-alive connection, not httpx: 32 httpx clients got
            # 136-145 sentences/s where these got 204-208, from one server, alternating, with the
            # clients' core only a third busy: httpx's pool holds requests back
            # (a 503's Retry-After is waited out, as a client should: shed, not an error)
            nonlocal errors, shed
            conn, i = Connection(url), k
            while time.perf_counter() < stop_at:
                sentence = sentences[i % len(sentences)]
                i += clients
                start = time.perf_counter()
                try:
                    status, headers = await conn.post("/v1/translate", {"model": "m", "texts": [sentence]})
                except TRANSPORT_ERRORS:
                    conn.close()
                    status, headers = 0, {}
                end = time.perf_counter()
                if status == 503:
                    shed += 1
                    await asyncio.sleep(min(float(headers.get("retry-after", 1)), max(0.0, stop_at - end)))
                elif status != 200:
                    errors += 1
                elif end <= stop_at:
                    latencies.append(end - start)
            conn.close()

        async def bad_client() -> None:
            nonlocal bad_ok, bad_total
            cases = bad_requests()
            while time.perf_counter() < stop_at:
                for body, status in cases:
                    r = await http.post("/v1/translate", content=body, headers={"content-type": "application/json"})
                    if r.status_code == 503:  # the queue was full: says nothing of the input
                        await asyncio.sleep(0.05)
                        continue
                    bad_total += 1
                    one_line = "error" in r.json() and "\n" not in r.json()["error"]
                    if r.status_code == status and one_line:
                        bad_ok += 1
                    else:
                        bad_wrong.append(f"{status} expected, got {r.status_code}: {r.text[:80]}")
                    await asyncio.sleep(0.05)

        tasks = [client(k) for k in range(clients)] + ([bad_client()] if bad else [])
        await asyncio.gather(*tasks)
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")

    out = {"sentences": len(latencies), "sentences_per_s": len(latencies) / seconds, "p50_ms": pct(0.5),
           "p99_ms": pct(0.99), "errors": errors, "shed": shed}
    if bad:
        out |= {"bad_requests": bad_total, "bad_answered_right": bad_ok, "bad_wrong": bad_wrong[:5]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True,
                        help="a multi30k-cpu model directory, en->de (benchmarks/quality.py makes "
                        "runs/quality/en-de)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--seconds", type=float, default=10.0, help="load time per client count and mode")
    parser.add_argument("--rounds", type=int, default=1, help="on/off alternations per client count")
    parser.add_argument("--bad-at", type=int, default=32, help="client count that gets the bad-input client")
    parser.add_argument("--server-core", default="1", help="CPU core of the servers ('' for none)")
    parser.add_argument("--client-core", default="0", help="CPU core of the clients, this process ('' for any)")
    parser.add_argument("--batch-wait-ms", type=float, help="the batching server's --batch-wait-ms")
    parser.add_argument("--out", type=Path, help=f"default {RESULTS} ({OVERLOAD_RESULTS} with --overload)")
    over = parser.add_argument_group("--overload")
    over.add_argument("--overload", action="store_true", help="push one batching server past its sustainable rate")
    over.add_argument("--sustain-clients", type=int, default=16, help="closed-loop clients that measure the rate")
    over.add_argument("--normal-seconds", type=float, default=20.0, help="time at the sustainable rate")
    over.add_argument("--overload-factor", type=float, default=4.0, help="times the sustainable rate")
    over.add_argument("--overload-seconds", type=float, default=60.0)
    over.add_argument("--overload-clients", type=int, default=256, help="requests in flight at most")
    burst = parser.add_argument_group("--burst")
    burst.add_argument("--burst", action="store_true", help="a burst of concurrent clients against one batching server")
    burst.add_argument("--burst-clients", type=int, default=256)
    burst.add_argument("--burst-sentences", type=int, default=8, help="sentences a request")
    burst.add_argument("--burst-beam", type=int, default=4)
    burst.add_argument("--burst-seconds", type=float, default=30.0)
    over.add_argument("--serve-flag", action="append", default=[], metavar="FLAG",
                      help="one more flag for the server (repeat; e.g. --serve-flag=--max-queue-wait-s=0.5)")
    args = parser.parse_args()
    require_model(args.model, script="benchmarks/serve.py")

    with gzip.open(DATA / "multi30k" / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    core = args.server_core or None
    if args.client_core:
        os.sched_setaffinity(0, {int(args.client_core)})
    extra = [] if args.batch_wait_ms is None else ["--batch-wait-ms", str(args.batch_wait_ms)]
    extra += args.serve_flag
    if args.overload:
        overload(args, sentences, core, extra)
        return
    if args.burst:
        burst_mode(args, sentences, core, extra)
        return
    offline = offline_rate(args.model, sentences, core=core, extra=extra)
    print(f"offline translate -i: {offline:.1f} sent/s", flush=True)
    servers = {mode: start_server(args.model, batching=mode == "on", core=core, extra=extra) for mode in ("on", "off")}
    rows = []
    try:
        for mode in ("on", "off"):  # warm up: first calls allocate
            asyncio.run(load(servers[mode][1], sentences, 4, 2.0, bad=False))
        for clients in args.clients:
            for r in range(args.rounds):
                for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):  # ABBA: a drift cancels
                    result = asyncio.run(load(servers[mode][1], sentences, clients, args.seconds,
                                              bad=clients == args.bad_at))
                    rows.append({"clients": clients, "batching": mode, "round": r, **result})
                    print(f"clients {clients:3d} batching {mode:3s} round {r}: {result['sentences_per_s']:7.1f} sent/s  "
                          f"p50 {result['p50_ms']:7.0f} ms  p99 {result['p99_ms']:7.0f} ms  errors {result['errors']}  shed {result['shed']}"
                          + (f"  bad {result['bad_answered_right']}/{result['bad_requests']}" if "bad_requests" in result else ""),
                          flush=True)
        batches = httpx.get(servers["on"][1] + "/metrics").text
        print("\n".join(line for line in batches.splitlines() if line.startswith("transformer_batch_requests")))
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=10)

    print()
    print("| clients | batching on: sent/s | p50 ms | p99 ms | batching off: sent/s | p50 ms | p99 ms | on/off sent/s | on/offline | errors (shed) | bad inputs answered right |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    summary = []
    for clients in args.clients:
        on = [r for r in rows if r["clients"] == clients and r["batching"] == "on"]
        off = [r for r in rows if r["clients"] == clients and r["batching"] == "off"]
        ratios = [a["sentences_per_s"] / b["sentences_per_s"] for a, b in zip(on, off, strict=True) if b["sentences_per_s"]]
        mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)  # noqa: E731
        bad = [r for r in on + off if "bad_requests" in r]
        bad_text = f"{sum(r['bad_answered_right'] for r in bad)}/{sum(r['bad_requests'] for r in bad)}" if bad else "-"
        line = {"clients": clients, "on": {k: mean(on, k) for k in ("sentences_per_s", "p50_ms", "p99_ms")},
                "off": {k: mean(off, k) for k in ("sentences_per_s", "p50_ms", "p99_ms")},
                "ratio_on_off": ratios, "errors": sum(r["errors"] for r in on + off),
                "shed": sum(r["shed"] for r in on + off), "bad": bad_text}
        line["ratio_on_offline"] = line["on"]["sentences_per_s"] / offline
        summary.append(line)
        print(f"| {clients} | {line['on']['sentences_per_s']:.1f} | {line['on']['p50_ms']:.0f} | {line['on']['p99_ms']:.0f} | "
              f"{line['off']['sentences_per_s']:.1f} | {line['off']['p50_ms']:.0f} | {line['off']['p99_ms']:.0f} | "
              f"{', '.join(f'{x:.2f}' for x in ratios)} | {line['ratio_on_offline']:.2f} | {line['errors']} ({line['shed']}) | {bad_text} |")
    write(args.out or RESULTS, {"seconds": args.seconds, "model": args.model, "server_flags": extra,
                                "offline_sentences_per_s": offline, "rows": rows, "summary": summary})


def write(out: Path, found: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": " ".join(sys.argv), "machine": platform.processor() or platform.machine(),
                               "hardware": describe(), "cpus": os.cpu_count(), **found}, indent=2) + "\n")
    print(f"wrote {out}")


def _served_run(args: argparse.Namespace, run: Any, sentences: list[str], core: str | None,
                extra: list[str]) -> tuple[dict, int]:
    """``run(url, pid, sentences, args)`` against a server of its own (batching on), the
    server's shedding metrics added; the figures and the server's exit status after SIGTERM."""
    proc, url = start_server(args.model, batching=True, core=core, extra=extra)
    try:
        found = run(url, proc.pid, sentences, args)
        metrics = httpx.get(url + "/metrics").text
        found["server_metrics"] = [line for line in metrics.splitlines()
                                   if line.startswith(("transformer_shed", "transformer_batch_requests_count",
                                                       "transformer_requests_unanswered"))]
    finally:
        proc.terminate()
        status = proc.wait(timeout=120)
    print("\n".join(found["server_metrics"]))
    return found, status


def overload(args: argparse.Namespace, sentences: list[str], core: str | None, extra: list[str]) -> None:
    found, status = _served_run(args, run_overload, sentences, core, extra)
    print(f"server exit status after SIGTERM: {status}")
    write(args.out or OVERLOAD_RESULTS, {"model": args.model, "server_flags": extra, "server_core": core,
                                         "exit_status": status, **found})


def burst_mode(args: argparse.Namespace, sentences: list[str], core: str | None, extra: list[str]) -> None:
    found, status = _served_run(args, run_burst, sentences, core, extra)
    write(args.out or BURST_RESULTS, {"model": args.model, "server_flags": extra, "server_core": core,
                                      "client_core": args.client_core, "exit_status": status, **found})

if __name__ == "__main__":
    main()
