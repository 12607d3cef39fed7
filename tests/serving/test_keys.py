"""API keys with requests per minute: the window at its edge (n let in, n+1 refused with 429 and
Retry-After, one more once the first has aged 60 s), each key its own, counted in /metrics; the
keys from ``--api-key KEY[:N]`` (repeatable), ``$TRANSFORMER_API_KEY`` and ``--api-key-file``."""

from __future__ import annotations

import asyncio
import json

import pytest

from transformer.errors import InputError
from transformer.serving.guard import Guard
from transformer.serving.metrics import Metrics
from transformer.serving.ratelimit import WINDOW_S, RateWindow
from transformer.serving.settings import (
    ApiKey,
    ServeSettings,
    api_keys,
    parse_api_key,
    read_keys_file,
)


@pytest.mark.parametrize("n", [1, 3, 60])
def test_the_window_lets_n_in_and_refuses_the_next(n):
    window = RateWindow(n)
    assert [window.take(now=100.0 + i * 0.001) for i in range(n)] == [0.0] * n
    wait = window.take(now=100.5)
    assert wait == pytest.approx(100.0 + WINDOW_S - 100.5)  # until the first is 60 s old
    assert window.take(now=100.0 + WINDOW_S - 1e-6) > 0  # not a moment before
    assert window.take(now=100.0 + WINDOW_S) == 0.0  # then one more


def test_no_60_seconds_hold_more_than_n():
    """Requests at a steady 2 a second against 30 a minute: in every 60-second span, at most 30
    were let in (a token bucket of 30 would let 60 through around a minute's edge)."""
    window, taken = RateWindow(30), []
    for i in range(600):
        now = i * 0.5
        if window.take(now=now) == 0.0:
            taken.append(now)
    for start in taken:
        assert sum(start <= t < start + WINDOW_S for t in taken) <= 30
    assert len(taken) >= 30 * (300 // 60)  # and the rate is used, not starved


def guard_with(keys, clock):
    async def ok(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return Guard(ok, metrics=Metrics(), max_body=100, keys=keys, clock=clock)


def get(guard, key, path="/v1/models"):
    """(status, headers, body) of a GET of ``path`` with ``key``."""
    sent = []

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    headers = [(b"x-api-key", key.encode())] if key else []
    asyncio.run(guard({"type": "http", "method": "GET", "path": path, "headers": headers}, receive, send))
    start = sent[0]
    return start["status"], dict(start["headers"]), sent[1]["body"]


@pytest.mark.parametrize("n", [1, 2, 5])
def test_each_key_at_its_edge_over_http(n):
    """n requests with the key pass, the n+1-th gets 429 with Retry-After (whole seconds, up)
    and one JSON line; another key and an unlimited key are not touched; 60 s later one more
    passes; the refusals are counted by the key's name."""
    now = [1000.0]
    guard = guard_with([ApiKey("a", per_minute=n, name="a-key"), ApiKey("b", per_minute=n),
                        ApiKey("c")], lambda: now[0])
    assert [get(guard, "a")[0] for _ in range(n)] == [200] * n
    now[0] += 0.25
    status, headers, body = get(guard, "a")
    assert status == 429 and headers[b"retry-after"] == b"60"  # 59.75 s, up
    line = json.loads(body)["error"]
    assert f"at most {n} requests a minute" in line and "\n" not in line
    assert [get(guard, "b")[0] for _ in range(n)] == [200] * n
    assert [get(guard, "c")[0] for _ in range(3 * n)] == [200] * 3 * n
    assert get(guard, "wrong")[0] == 401 and get(guard, "")[0] == 401
    assert get(guard, "a", path="/health")[0] == 200  # the open paths are not counted
    now[0] += WINDOW_S - 0.25
    assert get(guard, "a")[0] == 200
    assert dict(guard.metrics.rate_limited) == {"a-key": 1}
    assert 'transformer_rate_limited_total{key="a-key"} 1' in guard.metrics.render()


def test_rate_limits_through_the_app(make_client):
    """The whole app: --api-key k:2 answers two translations, refuses the third with 429."""
    client = make_client(api_keys=(ApiKey("k", per_minute=2),))
    body = {"model": "numbers", "texts": ["seven"], "beam": 1}
    statuses = [client.post("/v1/translate", json=body, headers={"X-API-Key": "k"}).status_code
                for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert 'path="/v1/translate",status="429"} 1' in client.get("/metrics").text


@pytest.mark.parametrize(("spec", "key", "rate"), [
    ("abc", "abc", None), ("abc:60", "abc", 60), ("a:b", "a:b", None), ("a:b:7", "a:b", 7),
])
def test_a_key_flag(spec, key, rate):
    got = parse_api_key(spec)
    assert (got.key, got.per_minute) == (key, rate)


@pytest.mark.parametrize(("spec", "words"), [(":5", ["empty"]), ("abc:0", ["positive"]),
                                             (" abc", ["space"])])
def test_a_bad_key_flag(spec, words):
    with pytest.raises(InputError) as bad:
        api_keys(api_key=["fine", spec])
    assert str(bad.value).startswith("--api-key 2:")
    for word in words:
        assert word in str(bad.value)


def test_a_keys_file(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("# team keys\n\nalpha 120\n  beta\ngamma 1  \n", encoding="utf-8")
    keys = read_keys_file(path)
    assert [(k.key, k.per_minute, k.name) for k in keys] == [
        ("alpha", 120, "keys.txt:3"), ("beta", None, "keys.txt:4"), ("gamma", 1, "keys.txt:5")]
    assert "alpha" not in repr(keys)  # a key never shows in a repr (or a log line)
    both = api_keys(api_key=["delta:5"], key_file=path)
    assert [k.key for k in both] == ["delta", "alpha", "beta", "gamma"]


@pytest.mark.parametrize(("text", "words"), [
    ("alpha 12 x\n", ["keys.txt:1", "KEY REQUESTS_PER_MINUTE"]),
    ("ok\nalpha ten\n", ["keys.txt:2"]),
    ("alpha 0\n", ["keys.txt:1", "positive"]),
    ("alpha\nbeta\nalpha 3\n", ["keys.txt:3", "twice"]),
    ("# nothing\n", ["no key"]),
])
def test_a_bad_keys_file_names_the_line(tmp_path, text, words):
    path = tmp_path / "keys.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as bad:
        read_keys_file(path)
    for word in words:
        assert word in str(bad.value)


def test_a_missing_keys_file_and_a_key_given_twice(tmp_path):
    with pytest.raises(InputError, match="--api-key-file .*missing"):
        read_keys_file(tmp_path / "missing")
    (tmp_path / "keys.txt").write_text("same\n", encoding="utf-8")
    with pytest.raises(InputError, match="given twice"):
        ServeSettings(api_keys=api_keys(api_key="same", key_file=tmp_path / "keys.txt"))


def test_serve_reads_the_keys_file_and_the_flags(monkeypatch, capsys, tmp_path, translation_dir):
    from fastapi.testclient import TestClient

    from transformer.cli import main
    from transformer.cli.serve import API_KEY_ENV
    from transformer.serving import process

    apps = []
    monkeypatch.setattr(process, "serve_until_stopped", lambda app, **kw: apps.append(app) or 0)
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    (tmp_path / "keys.txt").write_text("from-file 1\n", encoding="utf-8")
    assert main(["serve", "--model", str(translation_dir), "--precision", "fp32",
                 "--api-key", "flag-one", "--api-key", "flag-two:1",
                 "--api-key-file", str(tmp_path / "keys.txt")]) == 0
    with TestClient(apps[0]) as client:
        def status(key):
            return client.get("/v1/models", headers={"X-API-Key": key}).status_code

        assert [status("flag-one") for _ in range(3)] == [200] * 3
        assert [status("flag-two"), status("flag-two")] == [200, 429]
        assert [status("from-file"), status("from-file")] == [200, 429]
        assert status("other") == 401
