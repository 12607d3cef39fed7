"""``POST /v1/translate/stream``: the events joined are ``/v1/translate``'s answer (both engines),
refusals before the first event are the ordinary 4xx, a failure after it is an error event, and a
client that goes away stops the work."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from transformer.serving.batcher import Batcher, Overloaded

PARAGRAPH = "seven. forty-two. three hundred twelve. nine. eighty-one. six hundred."
TEXTS = [PARAGRAPH, "", "five hundred five"]


def events_of(body: str) -> list[tuple[str, dict]]:
    """A text/event-stream body -> (event, data) pairs, checked to be well formed."""
    out = []
    for block in body.split("\n\n"):
        if not block:
            continue
        kind, data = block.split("\n")
        assert kind.startswith("event: ") and data.startswith("data: "), block
        out.append((kind[len("event: "):], json.loads(data[len("data: "):])))
    return out


def close(got, want, where: str = "row") -> None:
    """One /v1/translate row as streamed and as answered: the same texts and counts, scores (its
    n-best's too) to float32's last bits (the sentences ran in other batches)."""
    if isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-5), where
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for k in want:
            close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            close(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


def check_joined(client, **decoding):
    body = {"model": "numbers", "texts": TEXTS, **decoding}
    want = client.post("/v1/translate", json=body)
    assert want.status_code == 200, want.text
    want = want.json()
    answer = client.post("/v1/translate/stream", json=body)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    events = events_of(answer.text)
    assert [kind for kind, _ in events] == ["sentence"] * 7 + ["done"]
    sentences = [data for _, data in events[:-1]]
    assert [d["index"] for d in sentences] == list(range(7))
    assert [(d["text_index"], d["sentence"]) for d in sentences] == [(0, k) for k in range(6)] + [(2, 0)]
    assert sentences[1]["source"] == "forty-two."
    done = events[-1][1]
    assert done["model"] == "numbers" and done["timing"]["total_ms"] > 0
    for got, row in zip(done["translations"], want["translations"], strict=True):
        close(got, row)
    for i, row in enumerate(want["translations"]):
        own = [d for d in sentences if d["text_index"] == i]
        assert " ".join(d["text"] for d in own if d["text"]) == row["text"]
        assert len(own) == row["sentences"]


@pytest.mark.parametrize("decoding", [{"beam": 3}, {"beam": 1}, {"sampling": True, "seed": 3},
                                      {"beam": 2, "nbest": 2, "alignments": True}])
def test_the_events_joined_are_the_unstreamed_answer(client, decoding):
    check_joined(client, **decoding)


@pytest.fixture
def ct2_client(make_client, translation_dir, tmp_path):
    """A client of the numbers model (a copy) decoded by CTranslate2."""
    pytest.importorskip("ctranslate2")
    from transformer.serving.models import load_served

    run = tmp_path / "numbers"
    shutil.copytree(translation_dir, run)
    served = load_served({"numbers": str(run)}, precision="fp32", engine="ctranslate2")
    assert served["numbers"].engine == "ctranslate2"
    return make_client(served)


def test_the_events_joined_are_the_unstreamed_answer_on_ctranslate2(ct2_client):
    check_joined(ct2_client, beam=4)


def check_tokens(client, text: str = "three hundred twelve", **decoding) -> list[dict]:
    """One sentence greedy or sampled: a token event per token (steps 1, 2, ...; the last one's
    text the sentence's), then the sentence and the answer, which is /v1/translate's."""
    body = {"model": "numbers", "texts": [text], **decoding}
    want = client.post("/v1/translate", json=body).json()
    events = events_of(client.post("/v1/translate/stream", json=body).text)
    tokens = [data for kind, data in events if kind == "token"]
    assert [kind for kind, _ in events] == ["token"] * len(tokens) + ["sentence", "done"]
    assert tokens and [t["step"] for t in tokens] == list(range(1, len(tokens) + 1))
    assert all((t["index"], t["text_index"], t["sentence"]) == (0, 0, 0) for t in tokens)
    assert tokens[-1]["text"] == events[-2][1]["text"] == want["translations"][0]["text"]
    for got, row in zip(events[-1][1]["translations"], want["translations"], strict=True):
        close(got, row)
    return tokens


@pytest.mark.parametrize("decoding", [{"beam": 1}, {"sampling": True, "seed": 3}])
def test_one_sentence_greedy_or_sampled_streams_its_tokens(client, decoding):
    check_tokens(client, **decoding)


@pytest.mark.parametrize("decoding", [{"beam": 1}, {"sampling": True, "seed": 3}])
def test_one_sentence_streams_its_tokens_on_ctranslate2(ct2_client, decoding):
    """Greedy through CTranslate2's token generator; sampling on ours (CTranslate2 is not given
    our seeded draws), its tokens told all the same."""
    check_tokens(ct2_client, **decoding)


@pytest.mark.parametrize("body", [{"texts": ["three hundred twelve"], "beam": 2},
                                  {"texts": ["seven. nine."], "beam": 1},
                                  {"texts": ["seven", "nine"], "beam": 1}])
def test_beam_search_and_several_sentences_stream_no_tokens(client, body):
    events = events_of(client.post("/v1/translate/stream", json={"model": "numbers", **body}).text)
    assert "token" not in [kind for kind, _ in events] and events[-1][0] == "done"


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"model": "nope", "texts": ["one"]}, 404, "model"),
    ({"model": "labels", "texts": ["one"]}, 422, "model"),
    ({"model": "numbers", "texts": ["one"], "beam": 0}, 422, "beam"),
    ({"model": "numbers", "texts": ["one"], "sampling": True, "constraints": [["eins"]]}, 422, "constraints"),
    ({"model": "numbers", "texts": []}, 422, "texts"),
    ({"model": "numbers", "texts": ["<p>one</p>"], "format": "html"}, 422, "format"),
])
def test_a_bad_request_is_refused_before_any_event(client, body, status, field):
    answer = client.post("/v1/translate/stream", json=body)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert list(answer.json()) == ["error"] and answer.json()["error"].startswith(field)


def test_api_keys_hold_for_the_stream(make_client):
    from transformer.serving.settings import ApiKey

    client = make_client(api_keys=(ApiKey("k1", name="ci"),))
    body = {"model": "numbers", "texts": ["one"]}
    assert client.post("/v1/translate/stream", json=body).status_code == 401
    answer = client.post("/v1/translate/stream", json=body, headers={"X-API-Key": "k1"})
    assert answer.status_code == 200 and events_of(answer.text)[-1][0] == "done"


def test_a_full_queue_before_the_first_event_is_a_503_and_after_it_an_error_event(client, monkeypatch):
    real = Batcher.submit
    calls = []

    async def full_after(self, payload, **kw):
        calls.append(payload)
        if len(calls) > refuse_after:
            raise Overloaded(2.0)
        return await real(self, payload, **kw)

    monkeypatch.setattr(Batcher, "submit", full_after)
    body = {"model": "numbers", "texts": [PARAGRAPH]}
    refuse_after = 0
    answer = client.post("/v1/translate/stream", json=body)
    assert answer.status_code == 503 and answer.headers["retry-after"] == "2"
    assert answer.json()["error"].startswith("model: 'numbers' has more work queued")

    calls.clear()
    refuse_after = 1
    answer = client.post("/v1/translate/stream", json=body)
    assert answer.status_code == 200
    events = events_of(answer.text)
    assert [kind for kind, _ in events] == ["sentence", "error"]
    assert events[1][1]["status"] == 503 and "more work queued" in events[1][1]["error"]


def test_a_client_that_goes_away_stops_the_work(client):
    """The client leaves once the first event reached it: the sentences after it are never
    decoded, nothing is left queued, and the request is no longer in flight."""
    app = client.app
    state = app.fastapi.state.server
    model = state.served["numbers"]
    decoded: list[list[str]] = []
    real = model.translator.translate

    def counted(sentences, **kw):
        decoded.append(list(sentences))
        return real(sentences, **kw)

    body = json.dumps({"model": "numbers", "texts": [PARAGRAPH], "beam": 2}).encode()
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/translate/stream", "raw_path": b"",
             "query_string": b"", "root_path": "", "server": ("test", 80), "client": ("test", 1),
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    sent: list[dict] = []

    async def run() -> None:
        left = asyncio.Event()
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if messages:
                return messages.pop()
            await left.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)
            if message["type"] == "http.response.body" and message.get("body"):
                left.set()  # the first event arrived: the client closes the page
                for _ in range(3):  # and the server reads the disconnect as uvicorn would
                    await asyncio.sleep(0)

        await asyncio.wait_for(app(scope, receive, send), timeout=30)

    model.translator.translate = counted
    try:
        client.portal.call(run)
    finally:
        del model.translator.translate
    assert sent[0]["status"] == 200
    bodies = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert [kind for kind, _ in events_of(bodies.decode())] == ["sentence"]
    assert decoded == [["seven."]]  # the first chunk only
    assert state.metrics.in_flight == 0
    assert state.batchers["numbers"].queued == 0 and state.batchers["numbers"].waiting_tokens == 0
    assert "/v1/translate/stream" in client.get("/openapi.json").json()["paths"]


def test_the_stream_is_shed_before_its_body_is_read_when_every_queue_is_full(client, monkeypatch):
    monkeypatch.setattr(Batcher, "full", lambda self: 3.0)
    answer = client.post("/v1/translate/stream", json={"model": "numbers", "texts": ["one"]})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "3"
    assert answer.json()["error"].startswith("every model has more work queued")
