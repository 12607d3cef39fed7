"""``POST /v1/translate`` with ``format: "html"``: the library's answer per document, per-line
fields refused with 422, an unreadable document with 400 naming its field."""

from __future__ import annotations

import pytest

DOCS = ['<p>seven <b>hundred</b> <a href="/x" title="two">forty</a>-two.</p><script>a<b</script>',
        "three <i>thousand</i>"]


def test_html_answers_are_the_librarys(client, served):
    from transformer.inference.html import translate_html_batch

    model = served["numbers"]
    options = model.default_options(beam_size=1, max_len=model.translator.config.max_len)
    want = translate_html_batch(model.translator, DOCS, options=options)
    r = client.post("/v1/translate", json={"model": "numbers", "texts": DOCS, "format": "html",
                                           "beam": 1, "max_len": model.translator.config.max_len})
    assert r.status_code == 200, r.text
    rows = r.json()["translations"]
    assert [row["text"] for row in rows] == [t.html for t in want]
    assert [row["elements"] for row in rows] == [t.elements for t in want] == [2, 1]
    assert "<script>a<b</script>" in rows[0]["text"]


@pytest.mark.parametrize("extra", [{"nbest": 2}, {"alignments": True}, {"constraints": [["x"]]},
                                   {"target_prefix": "drei"}])
def test_per_line_fields_are_refused(client, extra):
    r = client.post("/v1/translate", json={"model": "numbers", "texts": ["<b>seven</b>"],
                                           "format": "html", **extra})
    assert r.status_code == 422
    assert r.json()["error"].startswith(f"{next(iter(extra))}: not available with format \"html\"")


def test_an_unreadable_document_gets_400_naming_it(client):
    r = client.post("/v1/translate", json={"model": "numbers", "texts": ["seven", "<p>\u0001</p>"],
                                           "format": "html"})
    assert r.status_code == 400
    assert r.json() == {"error": "texts[1]: not an HTML document (control character U+0001 at "
                                 "character 4)"}


def test_an_unknown_format_is_refused(client):
    r = client.post("/v1/translate", json={"model": "numbers", "texts": ["seven"], "format": "xml"})
    assert r.status_code == 422 and r.json()["error"].startswith("format: ")
