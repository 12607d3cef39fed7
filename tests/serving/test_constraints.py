"""``POST /v1/translate`` with ``constraints`` (phrases per text) and ``glossary`` (source term,
target term pairs): the library's translations, each phrase in its text's translation, texts
without phrases as without the fields; 422 naming the field for a bad value or one past the
server's limits."""

from __future__ import annotations

import pytest

from transformer.data.builtin_task import english_number
from transformer.inference.lines import translate_lines
from transformer.inference.translator import Translator
from transformer.model_dir import load_model_dir
from transformer.serving.settings import Limits

TEXTS = [english_number(n) for n in (7, 42, 365, 1999)]


def post(client, **body):
    response = client.post("/v1/translate", json={"model": "numbers", "texts": TEXTS, "max_len": 40, **body})
    assert response.status_code == 200, response.text
    return [row["text"] for row in response.json()["translations"]]


def test_constraints_and_glossary_as_the_library(client, translation_dir):
    phrases = [["hundert"], [], ["drei", "zehn"], []]
    got = post(client, beam=3, constraints=phrases)
    loaded = load_model_dir(translation_dir)
    translator = Translator.from_loaded(loaded, options=loaded.record.decode_options(beam_size=3, max_len=40))
    want = translate_lines(translator, TEXTS, src_lang="en", tgt_lang="de", constraints=phrases)
    plain = post(client, beam=3)
    assert got == [t.text for t in want]
    for text, own, alone in zip(got, phrases, plain, strict=True):
        assert all(p in text for p in own)
        if not own:
            assert text == alone
    glossary = post(client, beam=3, glossary=[["seven", "sieben"], ["two", "zwei"]])
    assert "sieben" in glossary[0] and "zwei" in glossary[1]
    assert glossary[2:] == plain[2:]  # no source term there


@pytest.mark.parametrize("body, words", [
    ({"constraints": [["drei"]]}, ["constraints", "1 given for 4"]),
    ({"constraints": [["drei"], [""], [], []]}, ["constraints[1][0]", "empty"]),
    ({"constraints": [["\u2603"], [], [], []]}, ["constraints", "lacks"]),
    ({"constraints": "drei"}, ["constraints"]),
    ({"glossary": [["seven"]]}, ["glossary[0]"]),
    ({"glossary": [["seven", " "]]}, ["glossary[0]", "target term"]),
    ({"glossary": [["seven", "\u2603"]]}, ["glossary", "lacks"]),
    ({"glossary": [["seven", "sieben"]], "sampling": True}, ["glossary", "sampling"]),
])
def test_bad_values_name_the_field(client, body, words):
    response = client.post("/v1/translate", json={"model": "numbers", "texts": TEXTS, **body})
    assert response.status_code == 422, response.text
    line = response.json()["error"]
    assert "\n" not in line and all(word in line for word in words), line


def test_limits_apply_to_phrases(make_client):
    small = make_client(limits=Limits(max_texts=3, max_chars=12))
    ok = {"model": "numbers", "texts": ["nine"], "constraints": [["neun" * 3]]}
    assert small.post("/v1/translate", json=ok).status_code == 200
    over = {"model": "numbers", "texts": ["nine"], "constraints": [["neun" * 4]]}
    response = small.post("/v1/translate", json=over)
    assert response.status_code == 422 and "constraints[0][0]" in response.json()["error"]
    many = {"model": "numbers", "texts": ["nine"], "constraints": [["neun"] * 4]}
    response = small.post("/v1/translate", json=many)
    assert response.status_code == 422 and "constraints[0]: at most 3" in response.json()["error"]
    terms = {"model": "numbers", "texts": ["nine"], "glossary": [["nine", "x" * 13]]}
    response = small.post("/v1/translate", json=terms)
    assert response.status_code == 422 and "glossary[0][1]" in response.json()["error"]
