"""Every bad request gets a 4xx with one JSON line naming the field and the limit, and the server
keeps serving afterwards; the API key and CORS."""

from __future__ import annotations

import json

import pytest

from transformer.serving.settings import ApiKey, Limits

MAX_TEXTS, MAX_CHARS, MAX_BEAM = Limits().max_texts, Limits().max_chars, Limits().max_beam

GOOD = {"model": "numbers", "texts": ["forty two"], "beam": 1}


def post(client, path, body=None, *, raw=None, headers=None):
    content = raw if raw is not None else json.dumps(body).encode()
    return client.post(path, content=content, headers={"content-type": "application/json", **(headers or {})})


BAD = [  # (path, body or raw bytes, status, words the error line must hold)
    ("/v1/translate", b'{"model": "numbers", "texts": [', 400, ["body", "not valid JSON"]),
    ("/v1/translate", b'\xff\xfe{"model": 1}', 400, ["body", "not UTF-8", "0xff"]),
    ("/v1/translate", {**GOOD, "beam": "4"}, 422, ["beam", "integer"]),
    ("/v1/translate", {**GOOD, "beam": 0}, 422, ["beam", "positive", "got 0"]),
    ("/v1/translate", {**GOOD, "beam": 99}, 422, ["beam", f"at most {MAX_BEAM}"]),
    ("/v1/translate", {**GOOD, "texts": "forty two"}, 422, ["texts", "list"]),
    ("/v1/translate", {**GOOD, "texts": [42]}, 422, ["texts[0]", "string"]),
    ("/v1/translate", {**GOOD, "model": "nope"}, 404, ["model", "'nope'", "numbers"]),
    ("/v1/translate", {**GOOD, "model": "labels"}, 422, ["model", "classification"]),
    ("/v1/translate", {**GOOD, "texts": []}, 422, ["texts", "empty"]),
    ("/v1/translate", {**GOOD, "texts": ["one"] * (MAX_TEXTS + 1)}, 422, ["texts", f"at most {MAX_TEXTS}"]),
    ("/v1/translate", {**GOOD, "texts": ["one", "x" * (MAX_CHARS + 1)]}, 422, ["texts[1]", str(MAX_CHARS)]),
    ("/v1/translate", {**GOOD, "nbest": 3, "beam": 2}, 422, ["nbest", "beam"]),
    ("/v1/translate", {**GOOD, "length_penalty": -1}, 422, ["length_penalty"]),
    ("/v1/translate", {**GOOD, "colour": "red"}, 422, ["colour", "unknown field"]),
    ("/v1/translate", {**GOOD, "split": "no"}, 422, ["split", "boolean"]),
    ("/v1/translate", {**GOOD, "split": 0}, 422, ["split", "boolean"]),
    ("/v1/translate", {"texts": ["one"]}, 422, ["model", "required"]),
    ("/v1/translate", [1, 2], 422, ["body"]),
    ("/v1/classify", {"model": "labels", "texts": []}, 422, ["texts", "empty"]),
    ("/v1/classify", {"model": "numbers", "texts": ["one"]}, 422, ["model", "translation"]),
    ("/v1/attention", {"model": "numbers", "text": ""}, 422, ["text", "empty"]),
    ("/v1/attention", {"model": "numbers", "text": "x" * (MAX_CHARS + 1)}, 422, ["text", str(MAX_CHARS)]),
    ("/v1/attention", {"model": "labels", "text": "one", "target": "eins"}, 422, ["target"]),
    ("/v1/attention", {"model": "zzz", "text": "one"}, 404, ["model", "'zzz'"]),
]


def error_of(response, status):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and isinstance(body["error"], str)
    assert "\n" not in body["error"] and "Traceback" not in body["error"]
    return body["error"]


@pytest.mark.parametrize(("path", "body", "status", "words"), BAD, ids=[f"{i}" for i in range(len(BAD))])
def test_bad_request_gets_one_line(client, path, body, status, words):
    response = post(client, path, raw=body) if isinstance(body, bytes) else post(client, path, body)
    line = error_of(response, status)
    for word in words:
        assert word in line, line
    assert client.post("/v1/translate", json=GOOD).status_code == 200  # still serving


def test_oversized_body(make_client):
    client = make_client(max_body_bytes=200)
    body = {**GOOD, "texts": ["one hundred"] * 30}
    line = error_of(post(client, "/v1/translate", body), 413)
    assert "body" in line and "200 bytes" in line
    # a body sent in chunks without a length is counted as it arrives
    chunks = iter([json.dumps(body).encode()[i : i + 50] for i in range(0, 500, 50)])
    response = client.post("/v1/translate", content=chunks, headers={"content-type": "application/json"})
    assert "200 bytes" in error_of(response, 413)
    assert client.post("/v1/translate", json=GOOD).status_code == 200


def test_unknown_path_and_method_are_json(client):
    assert "/v2/translate" in error_of(client.get("/v2/translate"), 404)
    assert "/v1/translate" in error_of(client.get("/v1/translate"), 405)


def test_api_key(make_client):
    client = make_client(api_keys=(ApiKey("s3cret"),))
    assert "API key" in error_of(client.post("/v1/translate", json=GOOD), 401)
    assert error_of(client.post("/v1/translate", json=GOOD, headers={"Authorization": "Bearer nope"}), 401)
    assert client.post("/v1/translate", json=GOOD, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.post("/v1/translate", json=GOOD, headers={"X-API-Key": "s3cret"}).status_code == 200
    assert client.get("/health").status_code == 200 and client.get("/").status_code == 200


@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "/v1/translate", GOOD),
    ("post", "/v1/classify", {"model": "labels", "texts": ["seven"]}),
    ("post", "/v1/attention", {"model": "numbers", "text": "seven"}),
    ("get", "/v1/models", None),
])
def test_api_key_guards_every_api_route(make_client, method, path, body):
    """--api-key protects the whole API, not only translation: each route refuses a request
    without the key and answers it with the key."""
    client = make_client(api_keys=(ApiKey("s3cret"),))
    send = getattr(client, method)
    kwargs = {"json": body} if body is not None else {}
    assert "API key" in error_of(send(path, **kwargs), 401)
    assert send(path, headers={"X-API-Key": "s3cret"}, **kwargs).status_code == 200


def test_cors_off_unless_asked(make_client):
    origin = {"Origin": "http://127.0.0.1:9999"}
    plain = make_client()
    assert "access-control-allow-origin" not in plain.get("/health", headers=origin).headers
    open_ = make_client(cors_origins=("http://127.0.0.1:9999",))
    got = open_.get("/health", headers=origin).headers
    assert got["access-control-allow-origin"] == "http://127.0.0.1:9999"
