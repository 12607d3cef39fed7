"""The guard in front of every route, driven as a plain ASGI app with a body that arrives in
several messages, as uvicorn delivers a chunked upload (Starlette's TestClient reads the whole
body first and hands it over in one message, so only this reaches the running total)."""

from __future__ import annotations

import asyncio
import json

import pytest

from transformer.serving.guard import Guard
from transformer.serving.metrics import Metrics


def call(guard: Guard, chunks: list[bytes], *, headers=(), method="POST", path="/v1/translate"):
    """Send ``chunks`` (more_body on all but the last) through ``guard``; returns (status, body
    the app saw or None, messages the guard read)."""
    read: list[int] = []
    sent: list[dict] = []
    seen: dict[str, bytes] = {}

    async def receive():
        i = len(read)
        read.append(i)
        if i < len(chunks):
            return {"type": "http.request", "body": chunks[i], "more_body": i < len(chunks) - 1}
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def app(scope, receive, send):
        message = await receive()
        seen["body"] = message["body"]
        assert not message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    scope = {"type": "http", "method": method, "path": path, "headers": list(headers)}
    guard.app = app
    asyncio.run(guard(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, seen.get("body"), sent, len(read)


def make_guard(max_body=100, api_key=None) -> Guard:
    return Guard(None, metrics=Metrics(), max_body=max_body, api_key=api_key)


def test_a_chunked_body_is_counted_as_it_arrives():
    """Ten chunks of 30 bytes, each under the 100-byte limit, no content-length: refused with 413
    once the running total passes the limit (at the fourth chunk), without reading the rest and
    without calling the app."""
    status, body, sent, reads = call(make_guard(100), [b"x" * 30] * 10)
    assert status == 413 and body is None
    assert reads == 4  # 30, 60, 90, 120: stopped there
    error = json.loads(sent[-1]["body"])["error"]
    assert "100 bytes" in error and "\n" not in error


def test_a_chunked_body_under_the_limit_reaches_the_app_whole():
    chunks = [b'{"model": ', b'"numbers", ', b'"texts": ["one"]}']
    status, body, _, _ = call(make_guard(100), chunks)
    assert status == 200 and body == b"".join(chunks)
    # exactly at the limit passes; one byte more does not
    assert call(make_guard(60), [b"y" * 30, b"y" * 30])[0] == 200
    assert call(make_guard(60), [b"y" * 30, b"y" * 30, b"y"])[0] == 413


def test_a_declared_length_over_the_limit_is_refused_unread():
    status, body, _, reads = call(make_guard(100), [b"x"], headers=[(b"content-length", b"101")])
    assert status == 413 and body is None and reads == 0


def test_non_utf8_split_between_chunks_is_refused():
    status, body, sent, _ = call(make_guard(100), [b'{"a": "\xc3', b'\xff"}'])
    assert status == 400 and body is None
    assert "not UTF-8" in json.loads(sent[-1]["body"])["error"]


@pytest.mark.parametrize("path", ["/v1/translate", "/v1/classify", "/v1/attention", "/v1/models",
                                  "/v1/anything"])
def test_the_key_guards_every_api_path(path):
    guard = make_guard(api_key="k")
    method = "GET" if path == "/v1/models" else "POST"
    assert call(guard, [b"{}"], method=method, path=path)[0] == 401
    assert call(guard, [b"{}"], method=method, path=path, headers=[(b"x-api-key", b"k")])[0] == 200
    assert call(guard, [b"{}"], method=method, path=path,
                headers=[(b"authorization", b"Bearer k")])[0] == 200
    assert call(guard, [b"{}"], method=method, path=path,
                headers=[(b"authorization", b"Bearer kk")])[0] == 401


@pytest.mark.parametrize("path", ["/", "/health", "/metrics", "/static/app.js"])
def test_the_page_health_and_metrics_stay_open(path):
    assert call(make_guard(api_key="k"), [b""], method="GET", path=path)[0] == 200
