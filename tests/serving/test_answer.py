"""The routes render their answers themselves (:func:`transformer.serving.routes.answer`): the
bytes sent are the ones FastAPI's own rendering of the same dict gives (its encoder, then its
JSON response), for every kind of translate and classify answer."""

from __future__ import annotations

import json

import pytest

from transformer.serving.routes import answer


def fastapi_bytes(body):
    from fastapi.encoders import jsonable_encoder
    from fastapi.responses import JSONResponse

    return JSONResponse(jsonable_encoder(body)).body


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/translate", {"model": "numbers", "texts": ["forty two", "seven. nine"]}),
    ("/v1/translate", {"model": "numbers", "texts": ["forty two"], "nbest": 3, "beam": 3,
                       "alignments": True}),
    ("/v1/translate", {"model": "numbers", "texts": ["<p>forty two</p>"], "format": "html"}),
    ("/v1/classify", {"model": "labels", "texts": ["seven", "eleven"]}),
])
def test_the_bytes_sent_are_fastapis_rendering(client, path, body):
    got = client.post(path, json=body)
    assert got.status_code == 200, got.text
    parsed = got.json()
    assert got.content == fastapi_bytes(parsed) == answer(parsed).body
    assert got.headers["content-type"] == "application/json"


def test_non_ascii_and_floats_as_fastapi_writes_them():
    body = {"text": "Zwölf Äpfel – 十二", "score": -0.1 - 0.2, "n": [1, 2.5e-12, None, True]}
    assert answer(body).body == fastapi_bytes(body)
    assert json.loads(answer(body).body) == body
