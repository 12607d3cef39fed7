"""The server's outer layer, a plain ASGI middleware in front of every route: it counts and times
each request for the metrics, refuses an oversized or non-UTF-8 body and a missing or wrong API key
with a one-line JSON error, holds each key to its requests per minute (429 with ``Retry-After``),
and hands the routes a body it has already read in full (so a client that sends slowly holds only
its own request, never the model). It also counts the requests it let in and has not answered yet,
so a draining server knows when every one has its answer.

LibreTranslate's routes (``/translate``, ``/detect``, ``/languages``) pass it in their own terms:
their key comes in the body or the query string, so their route checks it through
:meth:`Guard.libretranslate_refusal` (400 missing, 403 unknown, 429 over its rate); a refusal of
the guard's own (body limit, UTF-8, every queue full) gets the status LibreTranslate's clients
know (400, 400, 429), and every answer on them allows any origin (``Access-Control-Allow-Origin:
*``, preflights answered here), as LibreTranslate's do.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from transformer.serving.metrics import Metrics
from transformer.serving.ratelimit import RateWindow
from transformer.serving.settings import ApiKey

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]
PROTECTED_PREFIX = "/v1/"  # the API; the page, /health and /metrics stay open
QUEUED_PATHS = frozenset({"/v1/translate", "/v1/translate/stream", "/v1/classify", "/v1/attention",
                          "/translate"})  # through a model's queue
LIBRETRANSLATE_PATHS = frozenset({"/translate", "/detect", "/languages"})
# our refusals as the statuses LibreTranslate's clients know: limits and validation 400, shedding
# 429, a deadline passed 500
LIBRETRANSLATE_STATUS = {404: 400, 413: 400, 422: 400, 503: 429, 504: 500}
CORS_ANY = [(b"access-control-allow-origin", b"*")]
ARRIVED = "transformer.arrived"  # the scope's key: when the request's body was in (perf_counter)


def libretranslate_status(status: int) -> int:
    """The status a LibreTranslate client gets for our ``status``."""
    return LIBRETRANSLATE_STATUS.get(status, status)


def overloaded_line(name: str, bound_s: float, retry_after_s: float) -> tuple[str, str]:
    """The 503's line for model ``name``'s full queue, and its Retry-After (whole seconds)."""
    retry = str(max(1, math.ceil(retry_after_s)))
    return (f"model: {name!r} has more work queued than it can start within {bound_s:g} s; "
            f"retry after {retry} s"), retry


async def send_error(send: Callable[[Message], Awaitable[None]], status: int, line: str,
                     *, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": line}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Wraps ``app``: metrics, body limit (``max_body`` bytes), UTF-8, the API ``keys`` when any
    (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``, compared in constant time) and their
    requests per minute, read on ``clock`` (seconds). It keeps the metrics' ``in_flight`` (requests
    let in and not answered yet) and ``unanswered`` (cancelled before their answer was sent: a
    drain that ran out of time). ``every_queue_full()``, when given, returns the seconds to retry
    after when no model could take a request: one for a queued route then gets 503 without its
    body parsed, which keeps a shed request cheap while the model needs the CPU.
    ``refused_unparsed(path, body, waited_s)``, when given, returns (model, seconds to retry
    after) for a body its model's queue would refuse (read from its JSON alone): 503 too, before
    the route, which under a burst keeps the excess from costing the model's core the route's
    work (validation, options, answering)."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_body: int, keys: Sequence[ApiKey] = (),
                 clock: Callable[[], float] = time.monotonic,
                 every_queue_full: Callable[[], float | None] | None = None,
                 refused_unparsed: Callable[[str, bytes, float], tuple[str, float] | None] | None = None,
                 queue_wait_s: float = 1.0) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body = max_body
        self.every_queue_full = every_queue_full
        self.refused_unparsed = refused_unparsed
        self.queue_wait_s = queue_wait_s  # the bound, for the 503's line
        self.keys = [(k.key.encode(), k) for k in keys]
        self.windows = {k.key: RateWindow(k.per_minute) for k in keys if k.per_minute is not None}
        self.clock = clock

    @staticmethod
    def header_key(headers: dict[bytes, bytes]) -> bytes:
        """The key the request's headers carry (b"": none)."""
        given = headers.get(b"x-api-key", b"")
        auth = headers.get(b"authorization", b"")
        if auth[:7].lower() == b"bearer ":
            given = auth[7:].strip()
        return given

    def _match(self, given: bytes) -> ApiKey | None:
        """The key ``given`` is, or None; every key is compared, so the time taken tells nothing
        about which one nearly matched."""
        found = None
        for raw, key in self.keys:
            if hmac.compare_digest(given, raw):
                found = key
        return found

    def _key_of(self, headers: dict[bytes, bytes]) -> ApiKey | None:
        """The key the request carries, or None."""
        return self._match(self.header_key(headers))

    def _over_rate(self, key: ApiKey) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        """Take one request from ``key``'s rate: None when let in, else the 429 (counted)."""
        window = self.windows.get(key.key)
        wait = window.take(now=self.clock()) if window is not None else 0.0
        if wait <= 0:
            return None
        self.metrics.rate_limited[key.name] += 1
        retry = max(1, math.ceil(wait))
        return (429, f"rate limit: at most {key.per_minute} requests a minute for this key; "
                f"retry after {retry} s", [(b"retry-after", str(retry).encode())])

    def libretranslate_refusal(self, given: str | None) -> tuple[int, str, dict[str, str]] | None:
        """For a LibreTranslate route whose request carries the key ``given`` (its ``api_key``,
        else its headers'; "" or None: none): None when let in (always, on a server without
        keys), else (status, line, headers): 400 without a key, 403 for an unknown one, 429 over
        its rate."""
        if not self.keys:
            return None
        if not given:
            return 400, "api_key: missing; this server needs an API key", {}
        key = self._match(given.encode())
        if key is None:
            return 403, "api_key: invalid API key", {}
        over = self._over_rate(key)
        if over is None:
            return None
        status, line, headers = over
        return status, line, {name.decode(): value.decode() for name, value in headers}

    async def _refused(self, scope: Scope, headers: dict[bytes, bytes],
                       send: Callable[[Message], Awaitable[None]]) -> bool:
        """Answer a request without a valid key, or over its key's rate: True when answered."""
        if not self.keys or not scope["path"].startswith(PROTECTED_PREFIX):
            return False
        key = self._key_of(headers)
        if key is None:
            await send_error(send, 401, "authorization: missing or wrong API key "
                             "(send 'Authorization: Bearer KEY' or 'X-API-Key: KEY')")
            return True
        over = self._over_rate(key)
        if over is not None:
            status, line, headers_out = over
            await send_error(send, status, line, headers=headers_out)
            return True
        return False

    async def _shed(self, scope: Scope, body: bytes, send: Callable[[Message], Awaitable[None]]) -> bool:
        """Answer 503 (LibreTranslate's routes: 429) to a request for a queued route when every
        model's queue is full, or when its own model's would refuse it."""
        if self.every_queue_full is None or scope["path"] not in QUEUED_PATHS:
            return False
        wait = self.every_queue_full()
        if wait is None:
            refused = None
            if self.refused_unparsed is not None:
                refused = self.refused_unparsed(scope["path"], body,
                                                time.perf_counter() - scope[ARRIVED])
            if refused is None:
                return False
            name, wait = refused
            self.metrics.shed[(name, "queue_full")] += 1
            line, retry = overloaded_line(name, self.queue_wait_s, wait)
            await send_error(send, 503, line, headers=[(b"retry-after", retry.encode())])
            return True
        self.metrics.shed[("*", "queue_full")] += 1
        retry = max(1, math.ceil(wait))
        await send_error(send, 503, f"every model has more work queued than it can start soon; "
                         f"retry after {retry} s", headers=[(b"retry-after", str(retry).encode())])
        return True

    @staticmethod
    async def _preflight(headers: dict[bytes, bytes], send: Callable[[Message], Awaitable[None]]) -> None:
        """A browser's CORS preflight of a LibreTranslate route: any origin, GET and POST, the
        headers it asks for."""
        asked = headers.get(b"access-control-request-headers", b"content-type")
        await send({"type": "http.response.start", "status": 204,
                    "headers": [(b"access-control-allow-methods", b"GET, POST, OPTIONS"),
                                (b"access-control-allow-headers", asked),
                                (b"access-control-max-age", b"600")]})
        await send({"type": "http.response.body", "body": b""})

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        answered = False
        libretranslate = scope["path"] in LIBRETRANSLATE_PATHS

        async def send_counted(message: Message) -> None:
            nonlocal status, answered
            if message["type"] == "http.response.start":
                if libretranslate:  # its answers, refusals included, in its terms
                    message = {**message, "status": libretranslate_status(int(message["status"]))}
                    names = {name.lower() for name, _ in message.get("headers", [])}
                    if b"access-control-allow-origin" not in names:
                        message["headers"] = [*message.get("headers", []), *CORS_ANY]
                status = int(message["status"])
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True

        self.metrics.in_flight += 1
        try:
            await self._handle(scope, receive, send_counted)
        except asyncio.CancelledError:  # the server gave up on it (a drain that ran out)
            self.metrics.unanswered += not answered
            raise
        finally:
            self.metrics.in_flight -= 1
            self.metrics.request(scope["method"], scope["path"], status, time.perf_counter() - start)

    async def _handle(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        headers = dict(scope.get("headers", []))
        if scope["method"] == "OPTIONS" and scope["path"] in LIBRETRANSLATE_PATHS:
            await self._preflight(headers, send)
            return
        if await self._refused(scope, headers, send):
            return
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            await send_error(send, 413, f"body: {int(declared)} bytes is over the limit of {self.max_body} bytes")
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left: nothing to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await send_error(send, 413, f"body: over the limit of {self.max_body} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        # from here on the server keeps the request waiting: what the model's queue counts
        # against its bound (not a slow client's own sending)
        scope[ARRIVED] = time.perf_counter()
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as err:
            await send_error(send, 400, f"body: not UTF-8 (byte 0x{body[err.start]:02x} at offset {err.start})")
            return
        if await self._shed(scope, body, send):
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as a server would

        await self.app(scope, replay, send)
