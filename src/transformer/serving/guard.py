"""The server's outer layer, a plain ASGI middleware in front of every route: it counts and times
each request for the metrics, refuses an oversized or non-UTF-8 body and a missing or wrong API key
with a one-line JSON error, and hands the routes a body it has already read in full (so a client
that sends slowly holds only its own request, never the model).
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from transformer.serving.metrics import Metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]
PROTECTED_PREFIX = "/v1/"  # the API; the page, /health and /metrics stay open


async def send_error(send: Callable[[Message], Awaitable[None]], status: int, line: str) -> None:
    body = json.dumps({"error": line}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Wraps ``app``: metrics, body limit (``max_body`` bytes), UTF-8 and the optional API key
    (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``, compared in constant time)."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_body: int, api_key: str | None) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body = max_body
        self.api_key = api_key.encode() if api_key else None

    def _key_ok(self, headers: dict[bytes, bytes]) -> bool:
        assert self.api_key is not None
        given = headers.get(b"x-api-key", b"")
        auth = headers.get(b"authorization", b"")
        if auth[:7].lower() == b"bearer ":
            given = auth[7:].strip()
        return hmac.compare_digest(given, self.api_key)

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self._handle(scope, receive, send_counted)
        finally:
            self.metrics.request(scope["method"], scope["path"], status, time.perf_counter() - start)

    async def _handle(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        headers = dict(scope.get("headers", []))
        if self.api_key is not None and scope["path"].startswith(PROTECTED_PREFIX) \
                and not self._key_ok(headers):
            await send_error(send, 401, "authorization: missing or wrong API key "
                             "(send 'Authorization: Bearer KEY' or 'X-API-Key: KEY')")
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
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as err:
            await send_error(send, 400, f"body: not UTF-8 (byte 0x{body[err.start]:02x} at offset {err.start})")
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as a server would

        await self.app(scope, replay, send)
