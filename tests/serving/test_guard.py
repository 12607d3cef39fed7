"""The guard in front of every route, driven as a plain ASGI app with a body that arrives in
several messages, as uvicorn delivers a chunked upload (Starlette's TestClient reads the whole
body first and hands it over in one message, so only this reaches the running total)."""

from __future__ import annotations

import asyncio
import json

import pytest

from transformer.serving.guard import Guard
from transformer.serving.metrics import Metrics
from transformer.serving.settings import ApiKey


def call(guard: Guard, chunks: list, *, headers=(), method="POST", path="/v1/translate", app=None,
         last_more_body: bool = False):
    """Send ``chunks`` (more_body on all but the last, unless ``last_more_body``; a dict is sent as
    it is) through ``guard``, then a disconnect; returns (status or None, body the app saw or
    None, messages the guard sent, messages it read)."""
    read: list[int] = []
    sent: list[dict] = []
    seen: dict[str, bytes] = {}

    async def receive():
        i = len(read)
        read.append(i)
        if i < len(chunks):
            if isinstance(chunks[i], dict):
                return chunks[i]
            more = i < len(chunks) - 1 or last_more_body
            return {"type": "http.request", "body": chunks[i], "more_body": more}
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def echo(scope, receive, send):
        message = await receive()
        seen["body"] = message["body"]
        assert message == {"type": "http.request", "body": message["body"], "more_body": False}
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    scope = {"type": "http", "method": method, "path": path, "headers": list(headers)}
    guard.app = app or echo
    asyncio.run(guard(scope, receive, send))
    status = next((m["status"] for m in sent if m["type"] == "http.response.start"), None)
    return status, seen.get("body"), sent, len(read)


def make_guard(max_body=100, api_key=None) -> Guard:
    keys = (ApiKey(api_key),) if api_key is not None else ()
    return Guard(None, metrics=Metrics(), max_body=max_body, keys=keys)


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


def test_an_error_is_json_with_its_length():
    status, _, sent, _ = call(make_guard(10), [b"x" * 11])
    start, body = sent
    assert status == 413 and start["headers"] == [
        (b"content-type", b"application/json"), (b"content-length", str(len(body["body"])).encode())]
    assert set(json.loads(body["body"])) == {"error"}


def test_the_key_error_says_how_to_send_it():
    _, _, sent, _ = call(make_guard(api_key="k"), [b"{}"])
    assert json.loads(sent[-1]["body"])["error"] == (
        "authorization: missing or wrong API key (send 'Authorization: Bearer KEY' or 'X-API-Key: KEY')")


@pytest.mark.parametrize("key", ["k", "XXXX", "a much longer key of 40 characters......"])
def test_no_key_header_never_matches(key):
    """Whatever the key, a request without one (or with an empty one) is refused."""
    guard = make_guard(api_key=key)
    assert call(guard, [b"{}"])[0] == 401
    assert call(guard, [b"{}"], headers=[(b"x-api-key", b"")])[0] == 401
    assert call(guard, [b"{}"], headers=[(b"authorization", b"Bearer ")])[0] == 401
    assert call(guard, [b"{}"], headers=[(b"authorization", key.encode())])[0] == 401  # no Bearer


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_every_method_with_a_body_is_limited(method):
    assert call(make_guard(50), [b"x" * 30] * 2, method=method)[0] == 413
    assert call(make_guard(50), [b"x" * 30], method=method)[0] == 200


def test_a_declared_length_at_the_limit_passes():
    status, body, _, _ = call(make_guard(4), [b"abcd"], headers=[(b"content-length", b"4")])
    assert status == 200 and body == b"abcd"


def test_a_client_that_leaves_mid_body_gets_nothing_and_the_app_is_not_called():
    status, body, sent, reads = call(make_guard(100), [b"x" * 10, b"y" * 10], last_more_body=True)
    assert status is None and body is None and sent == [] and reads == 3


def test_a_message_without_body_or_more_body_is_an_empty_last_one():
    """ASGI: ``body`` defaults to b"" and ``more_body`` to False."""
    status, body, _, reads = call(make_guard(100), [b"ab", {"type": "http.request"}])
    assert status == 200 and body == b"ab" and reads == 2
    assert call(make_guard(100), [{"type": "http.request", "body": b"cd"}])[1] == b"cd"


def test_the_app_reads_the_body_once_then_waits_for_the_disconnect():
    messages = []

    async def app(scope, receive, send):
        messages.append(await receive())
        messages.append(await receive())
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    assert call(make_guard(100), [b"ab", b"cd"], app=app)[0] == 204
    assert messages == [{"type": "http.request", "body": b"abcd", "more_body": False},
                        {"type": "http.disconnect"}]


def test_the_metrics_count_each_request_with_its_status_and_time():
    guard = make_guard(10, api_key="k")
    call(guard, [b"{}"], headers=[(b"x-api-key", b"k")])
    call(guard, [b"{}"])
    call(guard, [b"x" * 11], headers=[(b"x-api-key", b"k")], path="/v1/classify")

    async def broken(scope, receive, send):
        raise RuntimeError("the route failed before answering")

    with pytest.raises(RuntimeError):
        call(guard, [b"{}"], headers=[(b"x-api-key", b"k")], app=broken)
    assert dict(guard.metrics.requests) == {("POST", "/v1/translate", 200): 1,
                                            ("POST", "/v1/translate", 401): 1,
                                            ("POST", "/v1/classify", 413): 1,
                                            ("POST", "/v1/translate", 500): 1}
    latency = guard.metrics.latency["/v1/translate"]
    assert latency.count == 3 and 0 <= latency.sum < 60  # seconds, measured from the request
