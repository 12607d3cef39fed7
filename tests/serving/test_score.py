"""``POST /v1/score`` and the ``alignments`` of ``POST /v1/translate``: the library's answers,
and a 422 naming the field for a bad request."""

from __future__ import annotations

import copy

import pytest

from transformer.data.builtin_task import english_number, german_number

NUMBERS = (7, 42, 365, 1999)
SOURCES = [english_number(n) for n in NUMBERS] + [""]
TARGETS = [german_number(n) for n in NUMBERS] + ["sieben"]


def test_score_equals_the_library(client, served):
    from transformer.inference.scoring import Scorer, score_pairs

    got = client.post("/v1/score", json={"model": "numbers", "sources": SOURCES, "targets": TARGETS})
    assert got.status_code == 200, got.text
    data = got.json()
    model = served["numbers"]
    want = score_pairs(Scorer(model.loaded, precision=model.precision), SOURCES, TARGETS)
    assert data["scores"] == [w.to_dict() for w in want]
    assert data["model"] == "numbers" and data["precision"] == model.precision
    assert "/v1/score" in client.get("/openapi.json").json()["paths"]


@pytest.mark.parametrize("body, status, error", [
    ({"sources": ["a", "b"], "targets": ["c"]}, 422, "targets: 1 items, but sources has 2"),
    ({"sources": ["a", "b"], "targets": ["c", "acht" * 100]}, 422, "targets[1]: "),
    ({"sources": [], "targets": []}, 422, "sources: must not be empty"),
    ({"sources": ["a"]}, 422, "targets: required"),
    ({"sources": ["a"], "targets": ["b"], "beam": 2}, 422, "beam: unknown field"),
    ({"model": "labels", "sources": ["a"], "targets": ["b"]}, 422, "model: 'labels' is a classification"),
    ({"model": "nope", "sources": ["a"], "targets": ["b"]}, 404, "model: no loaded model named 'nope'"),
])
def test_a_bad_score_request_names_its_field(client, body, status, error):
    got = client.post("/v1/score", json={"model": "numbers", **body})
    assert got.status_code == status, got.text
    line = got.json()["error"]
    assert line.startswith(error) and "\n" not in line


def test_translate_carries_alignments_only_when_asked(client, served):
    from transformer.inference.lines import translate_lines

    texts = ["three hundred forty-five. seven", "forty-two", ""]
    body = {"model": "numbers", "texts": texts, "beam": 1}
    plain = client.post("/v1/translate", json=body).json()["translations"]
    assert all("alignments" not in t for t in plain)
    got = client.post("/v1/translate", json={**body, "alignments": True}).json()["translations"]
    model = served["numbers"]
    translator = copy.copy(model.translator)  # as the server does: the packed decoder shared
    translator.options = model.default_options(beam_size=1, alignments=True)
    want = translate_lines(translator, texts, src_lang="en", tgt_lang="de")
    assert [t["text"] for t in got] == [t["text"] for t in plain] == [w.text for w in want]
    assert [t["alignments"] for t in got] == [[list(p) for p in w.alignments] for w in want]
    assert got[2]["alignments"] == [] and got[0]["alignments"] and got[1]["alignments"]
